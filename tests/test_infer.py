"""omnishard infer (src/infer/, src/cli/cmd_infer.c, infer_run.c) against the PyTorch generation reference
(tests/oracle/slam_infer_ref.py, written from slam-omni.md "Inference"): the prompt (text question, dataset record,
spoken question) and the greedy tokens for G = 3 with the adapter and G = 1; the stop rules (eot then pad_t, eoa in any
layer then pad_a, both ended, max_new_tokens); the same output on 2 ranks at ZeRO-3; sampling invariants; errors.

The tiny random models are made to stop: the lm_head row of eot (and, for the audio, the adapter row of eoa in one
layer, or the lm_head row of eoa for G = 1) is solved from the oracle's hidden states so that its logit stays below
the others before a chosen step and wins at it (the models are untied, so no input embedding changes)."""
import json, os

import pytest
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

from oracle import slam_infer_ref as iref
from oracle import slam_omni_ref as ref
from oracle import slam_samples_ref as sref
from omni_run import run

T, A = 512, 80
RECIPE = dict(text_penalty=1.2, audio_penalty=1.2)   # omnishard infer's defaults: SLAM-LLM's inference recipe
QUESTION = "<USER>: What is the weather like in the city?"
MAX_NEW = 12


def infer(model, *args, np_=None, check=True, input=None):
    p = run(["infer", "--model", model, *args], np_=np_, check=check, timeout=120, input=input)
    return p if not check else json.loads(p.stdout)


def force_row(X, other_max, k, margin=1.0):
    """w (float64) with w . X[s] = other_max[s] - margin for s < k and other_max[k] + margin at s = k (min-norm)."""
    t = torch.tensor([m - margin for m in other_max[:k]] + [other_max[k] + margin], dtype=torch.float64)
    return torch.linalg.pinv(X[:k + 1].double()) @ t


def trace(model, adapter, ids, G, n):
    tr = []
    out = iref.generate(model, adapter, ids, G, T, A, n, trace=tr, **RECIPE)
    return out, tr


def others_max(x, skip):
    """the largest logit of x other than x[skip]"""
    return float(torch.cat([x[:skip], x[skip + 1:]]).max())


def stop_text_at(model, adapter, ids, G, k):
    """lm_head row eot: below the other (penalised) text logits before step k, above them at step k (eot's own logit
    is never penalised: it was not generated before)."""
    eot = sref.Vocab(T, A, G).eot
    _, tr = trace(model, adapter, ids, G, k + 1)
    H = torch.stack([s.h for s in tr])
    others = [others_max(s.xt, eot) for s in tr]
    with torch.no_grad():
        model.lm_head.weight[eot] = force_row(H, others, k).float()


def stop_audio_at(model, adapter, ids, G, k, layer):
    """eoa wins in `layer` at step k: the adapter's row (weights over z[T:T+A] and bias) for G > 1, the lm_head
    row T+eoa for G = 1."""
    eoa = sref.Vocab(T, A, G).eoa
    _, tr = trace(model, adapter, ids, G, k + 1)
    others = [others_max(s.xa[layer], eoa) for s in tr]   # the penalised audio logits of that layer
    if G == 1:
        X = torch.stack([s.h for s in tr])
        with torch.no_grad():
            model.lm_head.weight[T + eoa] = force_row(X, others, k).float()
        return
    X = torch.stack([torch.cat([s.z[T:T + A], torch.ones(1)]) for s in tr])
    w = force_row(X, others, k).float()
    with torch.no_grad():
        adapter.linear.weight[layer * A + eoa] = w[:A]
        adapter.linear.bias[layer * A + eoa] = w[A]


def save(d, model, adapter):
    model.save_pretrained(d, safe_serialization=True)
    if adapter is not None:
        save_file({f"group_decode_adapter.{k}": v.detach().contiguous() for k, v in adapter.state_dict().items()},
                  os.path.join(d, "slam_omni.safetensors"))


def make(d, G, tied=False, stops=None, seed=0):
    """A tiny random model with a tokenizer; stops: (text step, audio step, audio layer) to force, or None."""
    model, adapter = sref.make_model_dir(str(d), T=T, A=A, G=G, hidden=32, layers=2, heads=4, kv_heads=2, inter=64,
                                         tied=tied, seed=seed)
    with torch.no_grad():   # larger logits (wider margins between the top tokens than the tiny init gives)
        model.lm_head.weight.mul_(10.0)
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    ids, _, _ = iref.prompt({"source_text": QUESTION}, tok, T, A, G)
    if stops:
        kt, ka, layer = stops
        if ka < kt:   # the earlier stop first: the later one is solved on the trajectory that follows it
            stop_audio_at(model, adapter, ids, G, ka, layer)
            stop_text_at(model, adapter, ids, G, kt)
        else:
            stop_text_at(model, adapter, ids, G, kt)
            stop_audio_at(model, adapter, ids, G, ka, layer)
    save(str(d), model, adapter)
    model.eval()
    return model, adapter, tok


CASES = {   # name: (G, tied, (text stop step, audio stop step, layer) or None)
    "G3-adapter-audio-first": (3, False, (6, 3, 1)),
    "G1-text-first": (1, False, (3, 5, 0)),
    "G3-tied-no-stop": (3, True, None),
}


@pytest.fixture(scope="module", params=list(CASES), ids=list(CASES))
def case(request, tmp_path_factory):
    G, tied, stops = CASES[request.param]
    d = tmp_path_factory.mktemp(request.param)
    model, adapter, tok = make(d, G, tied, stops)
    return d, G, model, adapter, tok, stops


def check_same(got, want, tok):
    for k in ("text_ids", "audio", "codec", "steps", "text_end", "audio_end"):
        assert got[k] == want[k], (k, got[k], want[k])
    assert got["text"] == iref.decode(tok, want["text_ids"])


def test_greedy_matches_pytorch(case):
    """with the KV cache (the default) as the reference's generate with transformers' cache; without it (the whole
    sequence at every step) the same"""
    d, G, model, adapter, tok, stops = case
    got = infer(d, "--question", QUESTION, "--max_new_tokens", MAX_NEW, "--show_prompt")
    ids, _, _ = iref.prompt({"source_text": QUESTION}, tok, T, A, G)
    assert got["prompt_input_ids"] == ids
    want = iref.generate(model, adapter, ids, G, T, A, MAX_NEW, kv_cache=True, **RECIPE)
    check_same(got, want, tok)
    assert iref.generate(model, adapter, ids, G, T, A, MAX_NEW, **RECIPE) == want
    off = infer(d, "--question", QUESTION, "--max_new_tokens", MAX_NEW, "--show_prompt", "--kv_cache", "false")
    assert off == {**got, "decoder_positions": off["decoder_positions"]}
    P, n = got["prompt_positions"], got["steps"]   # the cache runs each position once; without, the sequence each step
    assert got["decoder_positions"] == P + n - 1 and off["decoder_positions"] == n * P + n * (n - 1) // 2
    assert got["code_layer"] == G and len(got["audio"]) == G
    if stops:   # the stop rules really ran: both streams ended at the forced steps, then generation stopped
        kt, ka, layer = stops
        assert got["text_end"] and got["audio_end"] and got["steps"] == max(kt, ka) + 1
        assert len(got["text_ids"]) == kt and len(got["audio"][0]) == ka + 1
        assert got["audio"][layer][ka] == A - 64                     # eoa, in that layer
        assert len(got["codec"]) <= G * ka + layer
    else:
        assert got["steps"] == MAX_NEW and not got["text_end"] and not got["audio_end"]
        assert len(got["text_ids"]) == MAX_NEW and all(len(a) == MAX_NEW for a in got["audio"])


def test_zero3_two_ranks_same_output(case):
    d, G, *_ = case
    one = infer(d, "--question", QUESTION, "--max_new_tokens", MAX_NEW)
    two = infer(d, "--question", QUESTION, "--max_new_tokens", MAX_NEW, "--deepspeed", "zero3", np_=2)
    assert two == one


@pytest.mark.parametrize("case", ["G3-adapter-audio-first"], indirect=True)
@pytest.mark.parametrize("stage,cache", [(0, "true"), (1, "false"), (2, "true"), (3, "false")])
def test_any_stage_two_ranks_same_output(case, stage, cache):
    """2 ranks at every ZeRO stage, with and without the KV cache, print what 1 rank prints"""
    d, G, *_ = case
    q = ["--question", QUESTION, "--max_new_tokens", MAX_NEW]
    one = infer(d, *q)
    two = infer(d, *q, "--zero_stage", stage, "--kv_cache", cache, np_=2)
    assert two == {**one, "decoder_positions": two["decoder_positions"]}


@pytest.mark.parametrize("case", ["G1-text-first"], indirect=True)
def test_text_only(case):
    d, G, model, adapter, tok, _ = case
    got = infer(d, "--question", QUESTION, "--max_new_tokens", 5, "--text_only")
    ids, _, _ = iref.prompt({"source_text": QUESTION}, tok, T, A, G)
    want = iref.generate(model, adapter, ids, G, T, A, 5, text_only=True, **RECIPE)
    check_same(got, want, tok)
    assert got["text_only"] and got["audio"] == [[]] * G


def test_dataset_record_prompt_and_tokens(tmp_path, case):
    d, G, model, adapter, tok, _ = case
    recs = sref.make_records(4, A=A, seed=3)
    recs[2]["source_text"] = "USER: Hello there. ASSISTANT: Hi! <USER>: " + recs[2]["source_text"][len("<USER>: "):]
    recs[2]["system_prompt"] = "You are a tiny test model."
    data = tmp_path / "data.jsonl"
    sref.write_jsonl(data, recs)
    got = infer(d, "--dataset", data, "--index", 2, "--max_new_tokens", 6, "--show_prompt")
    ids, _, _ = iref.prompt(recs[2], tok, T, A, G)
    full = sref.build(sref.fields(recs[2]), sref.Vocab(T, A, G), lambda s: tok.encode(s).ids, 1 << 40, "right")
    assert got["prompt_input_ids"] == ids == [r[:full["lead"]] for r in full["ids"]]
    check_same(got, iref.generate(model, adapter, ids, G, T, A, 6, **RECIPE), tok)


@pytest.mark.parametrize("case", ["G3-adapter-audio-first"], indirect=True)
def test_repetition_penalty(case):
    """greedy with other penalties than the defaults equals the reference's repetition_penalty (< 1 favours what was
    generated, > 1 penalises it; 1 switches it off), and each really changes the tokens"""
    d, G, model, adapter, tok, _ = case
    ids, _, _ = iref.prompt({"source_text": QUESTION}, tok, T, A, G)
    outs = []
    for args, kw in [(["--repetition_penalty", "1"], {}),
                     (["--text_repetition_penalty", "0.5", "--audio_repetition_penalty", "3"], dict(text_penalty=0.5, audio_penalty=3.0)),
                     ([], RECIPE)]:
        got = infer(d, "--question", QUESTION, "--max_new_tokens", MAX_NEW, *args)
        check_same(got, iref.generate(model, adapter, ids, G, T, A, MAX_NEW, **kw), tok)
        outs.append((got["text_ids"], got["audio"]))
    assert outs[0] != outs[1] and outs[0] != outs[2] and outs[1] != outs[2]


def drawn_allowed(s1, model, adapter, tok, G, **kw):
    """every token drawn in s1 is one the reference's filters keep (finite after repetition_penalty and
    filter_logits), given the tokens drawn before it; returns the number of steps checked"""
    V = sref.Vocab(T, A, G)
    ids, _, _ = iref.prompt({"source_text": QUESTION}, tok, T, A, G)
    ids = [list(r) for r in ids]
    text = s1["text_ids"] + ([V.eot] if s1["text_end"] else [])
    n = min(len(text), len(s1["audio"][0]))
    for step in range(n):
        _, _, xt, xa = iref.step_logits(model, adapter, ids, G, T, A)
        x = iref.filter_logits(iref.repetition_penalty(xt, text[:step], RECIPE["text_penalty"]), **kw)
        assert torch.isfinite(x[text[step]]), (step, "text")
        for g in range(G):
            x = iref.filter_logits(iref.repetition_penalty(xa[g], s1["audio"][g][:step], RECIPE["audio_penalty"]), **kw)
            assert torch.isfinite(x[s1["audio"][g][step]]), (step, g)
        for g in range(G):
            ids[g].append(T + s1["audio"][g][step])
        ids[G].append(text[step])
    return n


@pytest.mark.parametrize("case", ["G3-adapter-audio-first"], indirect=True)
def test_sampling(case):
    d, G, model, adapter, tok, _ = case
    q = ["--question", QUESTION, "--max_new_tokens", 8]
    greedy = infer(d, *q)
    sample = ["--do_sample", "true"]
    assert infer(d, *q, *sample, "--temperature", "1.5", "--top_k", 1, "--seed", 5) == greedy   # top-1 is the argmax
    assert infer(d, *q, *sample, "--temperature", "3", "--top_p", "1e-9", "--seed", 5) == greedy   # so is a tiny nucleus
    s1 = infer(d, *q, *sample, "--temperature", "5", "--top_k", 4, "--seed", 1)
    assert infer(d, *q, *sample, "--temperature", "5", "--top_k", 4, "--seed", 1) == s1          # the seed fixes the draws
    others = [infer(d, *q, *sample, "--temperature", "5", "--top_k", 4, "--seed", s) for s in (2, 3)]
    assert any(o["text_ids"] != s1["text_ids"] or o["audio"] != s1["audio"] for o in others)
    assert drawn_allowed(s1, model, adapter, tok, G, temperature=5.0, top_k=4) >= 4
    # nucleus sampling: every draw inside the reference's top-p set, and draws outside the argmax happen
    s2 = infer(d, *q, *sample, "--temperature", "2", "--top_p", "0.6", "--seed", 7)
    assert drawn_allowed(s2, model, adapter, tok, G, temperature=2.0, top_p=0.6) >= 4
    assert s2 != greedy


@pytest.mark.parametrize("case", ["G3-adapter-audio-first"], indirect=True)
def test_temperature_zero_is_greedy(case):
    """--temperature 0 is greedy decoding, as an ms-swift or transformers user writes it: the reference's argmax
    (its sample_next_token with do_sample false), also with --do_sample true and the other sampling options given
    (they then change nothing), and one note line on stderr says so"""
    d, G, model, adapter, tok, _ = case
    ids, _, _ = iref.prompt({"source_text": QUESTION}, tok, T, A, G)
    want = iref.generate(model, adapter, ids, G, T, A, MAX_NEW, **RECIPE)
    q = ["--question", QUESTION, "--max_new_tokens", MAX_NEW]
    for extra in ([], ["--do_sample", "true", "--top_k", 4, "--top_p", "0.5", "--seed", 3]):
        p = infer(d, *q, "--temperature", "0", *extra, check=False)
        assert p.returncode == 0, p.stderr
        check_same(json.loads(p.stdout), want, tok)
        notes = [l for l in p.stderr.splitlines() if "--temperature 0" in l]
        assert len(notes) == 1 and "greedy" in notes[0], p.stderr
        assert all(o in notes[0] for o in ("--do_sample", "--top_k", "--top_p", "--seed")), notes[0]
        assert "have no effect" in notes[0], notes[0]
    # the same sampling line at a positive temperature does draw other tokens (the options are live there)
    hot = infer(d, *q, "--temperature", "5", "--do_sample", "true", "--top_k", 4, "--seed", 3)
    assert (hot["text_ids"], hot["audio"]) != (want["text_ids"], want["audio"])


def conversation_ref(model, adapter, tok, G, questions, n, text_only=False):
    """The reference's multi-round generation (generate_s2s_online_multi_round.py: generate_from_text and its loop):
    each question answered after the history, then history += "USER: " + question + " ASSISTANT: " + the answer
    decoded with skip_special_tokens, stripped, + " " (:240; the question stripped too when text_only, :221, or when
    the audio ran to max_new_tokens, :223-225). The prompt is omnishard's training layout of the history (the
    record's "history" field; docs/inference.md)."""
    history, out = "", []
    for q in questions:
        ids, _, _ = iref.prompt({"source_text": q, "history": history}, tok, T, A, G)
        want = iref.generate(model, adapter, ids, G, T, A, n, text_only=text_only, **RECIPE)
        out.append((ids, history, want))
        answer = tok.decode([i for i in want["text_ids"] if i < tok.get_vocab_size()], skip_special_tokens=True)
        strip = text_only or want["generated_len"] == n
        history += "USER: " + (q.strip() if strip else q) + " ASSISTANT: " + answer.strip() + " "
    return out, history


@pytest.mark.parametrize("case", ["G3-adapter-audio-first", "G1-text-first"], indirect=True)
def test_multi_round(case):
    """questions from stdin, one per line: each round equals the reference after the history of the earlier ones;
    'c' starts a new conversation, 'h' prints the history (stderr), blank lines are skipped, 'q' ends; 2 ranks at
    ZeRO-3 give the same. max_new_tokens 8: the rounds stop (forced eot/eoa), the questions stay verbatim in the
    history; 5: they run to the limit and the reference strips them."""
    d, G, model, adapter, tok, _ = case
    lines = [QUESTION + " ", "And tomorrow? ", "", "h", "c", QUESTION + " ", "Thanks. ", "q", "Never read."]
    for n, verbatim in ((8, True), (5, False)):
        args = ["--multi_round", "--max_new_tokens", n, "--show_prompt"]
        p = infer(d, *args, check=False, input="\n".join(lines) + "\n")
        assert p.returncode == 0, p.stderr
        got = [json.loads(l) for l in p.stdout.splitlines()]
        (w1, h1), (w2, _) = [conversation_ref(model, adapter, tok, G, q, n) for q in (lines[:2], lines[5:7])]
        assert [g["round"] for g in got] == [1, 2, 3, 4]
        for g, (ids, history, w) in zip(got, w1 + w2):
            assert g["prompt_input_ids"] == ids and g["history"] == history
            check_same(g, w, tok)
        assert "history: " + h1 + "\n" in p.stderr and got[3]["history"] == got[1]["history"]
        assert got[1]["history"].startswith("USER: " + (QUESTION + " " if verbatim else QUESTION) + " ASSISTANT: ")
        assert all((w["generated_len"] < n) == verbatim for _, _, w in w1 + w2)
    two = infer(d, *args, np_=2, check=False, input="\n".join(lines) + "\n")
    assert two.returncode == 0 and two.stdout == p.stdout, two.stderr
    # text only: the question is stripped in the history (the reference's decode_text_only branch)
    p = infer(d, "--multi_round", "--max_new_tokens", 8, "--text_only", check=False, input=" Hi there \nAnd then?\n")
    got = [json.loads(l) for l in p.stdout.splitlines()]
    want, _ = conversation_ref(model, adapter, tok, G, [" Hi there ", "And then?"], 8, text_only=True)
    assert [g["history"] for g in got] == [h for _, h, _ in want] and got[1]["history"].startswith("USER: Hi there ASSISTANT:")
    for g, (_, _, w) in zip(got, want):
        check_same(g, w, tok)


def test_spoken_question_matches_pytorch(tmp_path):
    """A record with source_wav through the speech path (tiny Whisper encoder: T_s = 6), as in training."""
    import wave
    import numpy as np
    G = 3
    d = tmp_path / "m"
    model, adapter = sref.make_model_dir(str(d), T=T, A=A, G=G, hidden=32, layers=2, heads=4, kv_heads=2, inter=64,
                                         tied=True, seed=1)
    proj = ref.add_projector(str(d), 16, 24, 32)
    enc = ref.make_encoder(str(tmp_path / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    x = 0.5 * np.sin(2 * np.pi * 440 * np.arange(8000) / 16000)
    with wave.open(str(tmp_path / "q.wav"), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes((x * 32767).astype("<i2").tobytes())
    rec = {"source_wav": "q.wav", "source_text": QUESTION, "target_text": "Fine.", "target_token": [1, 2, 3]}
    sref.write_jsonl(tmp_path / "data.jsonl", [rec])
    got = infer(d, "--dataset", tmp_path / "data.jsonl", "--speech_encoder", tmp_path / "enc", "--max_new_tokens", 5,
                "--show_prompt")
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    ids, speech, _ = iref.prompt(rec, tok, T, A, G, T_s=6)
    assert got["prompt_input_ids"] == ids and sum(speech) == 6
    with torch.no_grad():
        p = proj(ref.speech_features(enc, tmp_path / "q.wav"))
        want = iref.generate(model.eval(), adapter, ids, G, T, A, 5, speech=speech, proj=p, **RECIPE)
    check_same(got, want, tok)
    # --wav builds the same prompt from the command line; 2 ranks at ZeRO-3 give the same
    two = infer(d, "--wav", tmp_path / "q.wav", "--question", QUESTION, "--speech_encoder", tmp_path / "enc",
                "--max_new_tokens", 5, "--show_prompt", "--deepspeed", "zero3", np_=2)
    assert two == got
    # without the KV cache the speech positions run (projector output spliced in) at every step: the same
    off = infer(d, "--dataset", tmp_path / "data.jsonl", "--speech_encoder", tmp_path / "enc", "--max_new_tokens", 5,
                "--show_prompt", "--kv_cache", "false")
    assert off == {**got, "decoder_positions": off["decoder_positions"]}
    with torch.no_grad():
        assert iref.generate(model, adapter, ids, G, T, A, 5, speech=speech, proj=p, kv_cache=True, **RECIPE) == want
    # asr: the transcript only (no audio is predicted)
    asr = infer(d, "--wav", tmp_path / "q.wav", "--task", "asr", "--speech_encoder", tmp_path / "enc",
                "--max_new_tokens", 4, "--show_prompt")
    ids, speech, is_asr = iref.prompt({"task_type": "asr", "source_wav": "q.wav"}, tok, T, A, G, T_s=6)
    assert is_asr and asr["prompt_input_ids"] == ids and asr["text_only"]
    with torch.no_grad():
        check_same(asr, iref.generate(model, adapter, ids, G, T, A, 4, speech=speech, proj=p, text_only=True, **RECIPE), tok)


@pytest.mark.parametrize("case", ["G3-adapter-audio-first"], indirect=True)
def test_tts_and_system_prompt(case):
    d, G, model, adapter, tok, _ = case
    text, system = "Read this aloud, please.", "Speak slowly."
    got = infer(d, "--question", text, "--task", "tts", "--system_prompt", system, "--max_new_tokens", 3, "--show_prompt")
    ids, _, _ = iref.prompt({"task_type": "tts", "target_text": text, "system_prompt": system}, tok, T, A, G)
    assert got["prompt_input_ids"] == ids
    check_same(got, iref.generate(model, adapter, ids, G, T, A, 3, **RECIPE), tok)


def test_no_gradient_or_optimizer_memory(tmp_path):
    """the session inference opens (model, runtime) allocates the parameters only: a training runtime would add
    gradients and two AdamW moments (4x the parameters); 1 rank, and 2 ranks at ZeRO-0 and ZeRO-3 (half each)"""
    import re
    from safetensors.numpy import load_file
    d = tmp_path / "m"
    sref.make_model_dir(str(d), T=T, A=A, G=3, hidden=128, layers=4, heads=4, kv_heads=2, inter=512)
    n = sum(v.size for f in ("model.safetensors", "slam_omni.safetensors") for v in load_file(str(d / f)).values())
    for np_, stage, part in ((None, 0, 1), (2, 0, 1), (2, 3, 2)):
        p = run(["infer", "--model", d, "--question", QUESTION, "--max_new_tokens", 4, "--zero_stage", stage], np_=np_)
        m = re.search(r"memory \(rank 0\): parameters (\d+) bytes, session (\d+) bytes", p.stderr)
        params, session = int(m[1]), int(m[2])
        assert 4 * n / part <= params <= 4 * n / part * 1.01, (params, n)
        assert params <= session < 1.1 * params, (session, params)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("small")
    sref.make_model_dir(str(d / "m"), T=T, A=A, G=3, hidden=16, layers=1, heads=2, kv_heads=1, inter=32)
    sref.write_jsonl(d / "data.jsonl", sref.make_records(2, A=A))
    ref.make_data(str(d / "pretok.jsonl"), 2, G=3, T=T, A=A)
    return d


@pytest.mark.parametrize("args,message", [
    (["--model", "{d}/nope", "--question", "hi"], "nope/config.json"),
    (["--model", "{d}/m", "--question", "  "], "--question: empty question"),
    (["--model", "{d}/m"], "--question TEXT, --wav FILE, --dataset FILE or --multi_round"),
    (["--model", "{d}/m", "--multi_round", "--question", "hi"], "--multi_round: the questions come from stdin"),
    (["--model", "{d}/m", "--multi_round", "--task", "tts"], "--multi_round: only with --task s2s"),
    (["--question", "hi"], "--model DIR is required"),
    (["--model", "{d}/m", "--dataset", "{d}/data.jsonl", "--index", "5"], "--index 5: {d}/data.jsonl has 2 usable record(s)"),
    (["--model", "{d}/m", "--dataset", "{d}/pretok.jsonl"], "pretokenized samples have no prompt/answer split"),
    (["--model", "{d}/m", "--dataset", "{d}/missing.jsonl"], "missing.jsonl"),
    (["--model", "{d}/m", "--wav", "{d}/missing.wav"], "--wav: cannot read"),
    (["--model", "{d}/m", "--wav", "{d}/data.jsonl"], "no speech encoder"),
    (["--model", "{d}/m", "--question", "hi", "--temperature", "-1"], "--temperature: expected a value in [0,3.4e38], got '-1'"),
    # 0 is greedy decoding (test_temperature_zero_is_greedy); a positive value below what the float division takes is not
    (["--model", "{d}/m", "--question", "hi", "--temperature", "1e-35", "--do_sample", "true"],
     "--temperature: expected 0 (greedy) or a value in [1e-30,3.4e38], got 1e-35"),
    # each range is what the consumer represents (float temperature and penalties; an int count)
    (["--model", "{d}/m", "--question", "hi", "--temperature", "1e39", "--do_sample", "true"], "--temperature: expected a value in [0,3.4e38]"),
    (["--model", "{d}/m", "--question", "hi", "--audio_repetition_penalty", "1e39"], "--audio_repetition_penalty: expected a value in (0,3.4e38]"),
    (["--model", "{d}/m", "--question", "hi", "--max_new_tokens", "4611686018427387904"], "--max_new_tokens: expected a value in [1,2147483647]"),
    (["--model", "{d}/m", "--question", "hi", "--top_k", "0x10"], "--top_k: expected a decimal integer, got '0x10'"),
    (["--model", "{d}/m", "--question", "hi", "--temperature", "0.7"], "--temperature: only with --do_sample true"),
    (["--model", "{d}/m", "--question", "hi", "--top_p", "0.9"], "--top_p: only with --do_sample true"),
    (["--model", "{d}/m", "--question", "hi", "--do_sample", "true", "--top_p", "0"], "--top_p: expected a value in (0,1]"),
    (["--model", "{d}/m", "--question", "hi", "--do_sample", "true", "--top_p", "1.5"], "--top_p: expected a value in (0,1]"),
    (["--model", "{d}/m", "--question", "hi", "--do_sample", "yes"], "--do_sample: expected true or false"),
    (["--model", "{d}/m", "--question", "hi", "--kv_cache", "off"], "--kv_cache: expected true or false"),
    (["--model", "{d}/m", "--question", "hi", "--repetition_penalty", "0"], "--repetition_penalty: expected a value in (0,3.4e38]"),
    (["--model", "{d}/m", "--question", "hi", "--repetition_penalty", "2", "--text_repetition_penalty", "1.1"],
     "--repetition_penalty sets both penalties"),
    (["--model", "{d}/m", "--question", "hi", "--max_new_tokens", "0"], "--max_new_tokens: expected a value in [1,2147483647]"),
    (["--model", "{d}/m", "--question", "hi", "--top_k", "3"], "--top_k: only with --do_sample true"),
    (["--model", "{d}/m", "--question", "hi", "--task", "asr"], "--task asr: needs --wav FILE"),
    (["--model", "{d}/m", "--question", "hi", "--bogus", "1"], "unknown option '--bogus'"),
])
def test_errors(small, args, message):
    p = infer_fail(small, [a.format(d=small) for a in args], None)
    assert message.format(d=small) in p.stderr, p.stderr


@pytest.mark.parametrize("args,message", [
    (["--model", "{d}/nope", "--question", "hi"], "nope/config.json"),
    (["--model", "{d}/m", "--question", ""], "--question: empty question"),
    (["--model", "{d}/m", "--dataset", "{d}/data.jsonl", "--index", "5"], "has 2 usable record(s)"),
])
def test_errors_two_ranks(small, args, message):
    """every rank stops with the message (no rank waits for the others)"""
    p = infer_fail(small, [a.format(d=small) for a in args], 2)
    assert p.stderr.count(message.format(d=small)) == 2, p.stderr


def infer_fail(d, args, np_):
    p = run(["infer", *args], np_=np_, check=False, timeout=60)
    assert p.returncode > 0 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert "Segmentation" not in p.stderr and "internal error" not in p.stderr, p.stderr
    return p


def test_help():
    p = run(["infer", "--help"])
    assert "--kv_cache BOOL" in p.stdout and "--max_new_tokens" in p.stdout and "--multi_round" in p.stdout
