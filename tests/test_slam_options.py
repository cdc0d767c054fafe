"""The reference's code options (X-LANCE/SLAM-LLM examples/s2s): num_latency_tokens, do_layershift and its mask of
every audio label when the answer text and audio have the same length (--mask_equal_length_audio). omnishard's
samples against the line-by-line port of SpeechDatasetJsonl.__getitem__ (tests/oracle/slam_samples_ref.py), the
training steps against PyTorch (tests/oracle/slam_omni_ref.py), generation against tests/oracle/slam_infer_ref.py."""
import json, os

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from oracle import slam_infer_ref as iref
from oracle import slam_omni_ref as oref
from oracle import slam_samples_ref as ref
from omni_run import logs, rel, run, sft, weights
from test_slam_dataset import check_samples, records, tool

T, A = 512, 80


def model_dir(d, G, latency, layershift):
    os.makedirs(d, exist_ok=True)
    ref.train_tokenizer(d / "tokenizer.json", vocab_size=320)
    json.dump({"code_layer": G, "padded_text_vocabsize": T, "padded_audio_vocabsize": A,
               "num_latency_tokens": latency, "do_layershift": layershift}, open(d / "slam_omni.json", "w"))
    return d


@pytest.mark.parametrize("G,latency,layershift", [(3, 2, False), (3, 0, True), (3, 2, True), (1, 1, True), (2, 3, False)])
def test_samples_match_reference(tmp_path, G, latency, layershift):
    mdir = model_dir(tmp_path / "m", G, latency, layershift)
    data = tmp_path / "data.jsonl"
    ref.write_jsonl(data, records(tmp_path))
    got, tail, _ = tool(data, mdir)
    want, _ = ref.load(str(data), str(mdir / "tokenizer.json"), T, A, G, 4096, num_latency_tokens=latency,
                       do_layershift=layershift)
    check_samples(got, want)
    for w in want:   # the cases are there: latency pads trained before the audio, layer g's ids in its own range
        lead = w["lead"]
        for g in range(G):
            ids = w["ids"][g]
            lo = T + (g * A if layershift else 0)
            assert all(lo <= x < lo + A for x in ids), (g, ids)
            if w["labels"][g][lead] != -100 and latency:
                assert w["labels"][g][lead:lead + latency] == [A - 63] * latency
    # truncation cuts the same sample
    got, _, _ = tool(data, mdir, 360)
    check_samples(got, ref.load(str(data), str(mdir / "tokenizer.json"), T, A, G, 360, num_latency_tokens=latency,
                                do_layershift=layershift)[0])


@pytest.mark.parametrize("G,latency", [(3, 0), (3, 2), (1, 0)])
def test_equal_length_audio_labels(tmp_path, G, latency):
    """The reference masks every audio label when len(text ids) + 1 == T_a (labels[:G, -0:]); omnishard trains them
    unless --mask_equal_length_audio."""
    mdir = model_dir(tmp_path / "m", G, latency, False)
    tok = Tokenizer.from_file(str(mdir / "tokenizer.json"))
    text = "The river is green."
    n = len(tok.encode(text).ids) + 1 - latency            # audio positions wanted (without the latency pads)
    recs = [{"source_text": "<USER>: equal", "target_text": text, "target_token": [3] * (n * G - 1)},   # equal
            {"source_text": "<USER>: longer", "target_text": text, "target_token": [3] * (n * G + 4)}]
    data = tmp_path / "data.jsonl"
    ref.write_jsonl(data, recs)
    for mask in (0, 1):
        got, _, _ = tool(data, mdir, extra=["--mask_equal_length_audio", mask])
        want, _ = ref.load(str(data), str(mdir / "tokenizer.json"), T, A, G, 4096, num_latency_tokens=latency,
                           mask_equal_audio=bool(mask))
        check_samples(got, want)
        lead = want[0]["lead"]
        assert len(want[0]["ids"][0]) - lead == n + latency   # the equal case: La == len(text) + 1 == T_a
        trained = sum(x != -100 for r in want[0]["labels"][:G] for x in r)
        assert (trained == 0) == bool(mask) and trained in (0, (n + latency) * G)
        assert sum(x != -100 for r in want[1]["labels"][:G] for x in r) > 0   # other samples keep their labels


@pytest.mark.parametrize("rows", [None, 5])
def test_train_step_matches_pytorch(tmp_path, monkeypatch, rows):
    """Layer shift (T + G*A rows, no adapter, layer g's own logit columns) and 2 latency tokens (given on the
    command line over slam_omni.json's 0): losses, step-1 gradients, weights after 3 steps. rows = 5
    (OMNISHARD_LOGITS_ROWS): the head's rows in chunks of at most 5 in each class (text and audio targets, audio
    only: the G*A audio columns; src/model/loss.c), several per class, in fp32 without the stash."""
    if rows:
        monkeypatch.setenv("OMNISHARD_LOGITS_ROWS", str(rows))
    G, latency = 3, 2
    mdir = tmp_path / "model"
    model, adapter = ref.make_model_dir(str(mdir), T=T, A=A, G=G, hidden=32, layers=2, heads=4, kv_heads=2, inter=64,
                                        tied=False, layershift=True)
    assert adapter is None and model.lm_head.weight.shape[0] == T + G * A
    data = tmp_path / "data.jsonl"
    ref.write_jsonl(data, ref.make_records(5, A=A, seed=4))
    samples, _ = ref.load(str(data), str(mdir / "tokenizer.json"), T, A, G, 4096, num_latency_tokens=latency,
                          do_layershift=True)
    out = tmp_path / "out"
    sft(str(mdir), str(data), str(out), 3, ["--learning_rate", "1e-3", "--gradient_accumulation_steps", 2,
                                            "--num_latency_tokens", latency, "--max_length", 4096,
                                            "--dump_grads", str(tmp_path / "grads.safetensors")])
    rlogs, rgrads, rfinal = oref.train(model, None, [(s["ids"], s["labels"]) for s in samples], G=G, T=T, A=A, steps=3,
                                       lr=1e-3, accum=2)
    clogs = logs(out)
    for c, r in zip(clogs, rlogs):
        for k in ("loss", "text_loss", "audio_loss_0", "audio_loss_1", "audio_loss_2", "grad_norm"):
            assert abs(c[k] - r[k]) <= 1e-5 * max(abs(r[k]), 1e-6), (k, c[k], r[k], c["step"])
    cg = load_file(str(tmp_path / "grads.safetensors"))
    assert set(cg) == set(rgrads)
    for k, g in rgrads.items():
        assert rel(cg[k], g.numpy()) <= 1e-4, k
    final = out / "final_model"
    cw = weights(str(final))
    for k, w in rfinal.items():
        assert rel(cw[k], w.numpy()) <= 1e-4, k
    cfg = json.load(open(final / "slam_omni.json"))
    assert cfg["num_latency_tokens"] == latency and cfg["do_layershift"] is True


def test_infer_matches_pytorch(tmp_path):
    """Generation with layer shift and 2 latency tokens: audio held back for 2 steps, fed back as T + g*A + a, the
    codec stream starts after the latency positions; eoa forced in layer 1 at step 5 (lm_head row T + A + eoa)."""
    G, latency, n = 3, 2, 9
    d = tmp_path / "m"
    model, _ = ref.make_model_dir(str(d), T=T, A=A, G=G, hidden=32, layers=2, heads=4, kv_heads=2, inter=64,
                                  tied=False, layershift=True, latency=latency)
    with torch.no_grad():
        model.lm_head.weight.mul_(10.0)
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    question = "<USER>: What is the weather like in the city?"
    ids, _, _ = iref.prompt({"source_text": question}, tok, T, A, G, layershift=True)
    model.eval()
    tr = []
    recipe = dict(text_penalty=1.2, audio_penalty=1.2)   # omnishard infer's default repetition penalties
    iref.generate(model, None, ids, G, T, A, 6, trace=tr, latency=latency, layershift=True, **recipe)
    eoa, row = A - 64, T + A + A - 64   # layer 1's eoa
    H = torch.stack([s.h for s in tr]).double()
    others = [float(torch.cat([s.xa[1][:eoa], s.xa[1][eoa + 1:]]).max()) for s in tr]   # penalised (pad_a as well)
    t = torch.tensor([m - 1.0 for m in others[:5]] + [others[5] + 1.0], dtype=torch.float64)
    with torch.no_grad():
        model.lm_head.weight[row] = (torch.linalg.pinv(H) @ t).float()
    model.save_pretrained(str(d), safe_serialization=True)
    got = json.loads(run(["infer", "--model", d, "--question", question, "--max_new_tokens", n, "--show_prompt"]).stdout)
    assert got["prompt_input_ids"] == ids and got["num_latency_tokens"] == latency and got["do_layershift"] is True
    want = iref.generate(model, None, ids, G, T, A, n, latency=latency, layershift=True, **recipe)
    for k in ("text_ids", "audio", "codec", "steps", "text_end", "audio_end"):
        assert got[k] == want[k], (k, got[k], want[k])
    off = json.loads(run(["infer", "--model", d, "--question", question, "--max_new_tokens", n, "--show_prompt",
                          "--kv_cache", "false"]).stdout)   # the KV cache on == off
    assert off == {**got, "decoder_positions": off["decoder_positions"]}
    assert all(a[:latency] == [A - 63] * latency for a in want["audio"]) and want["audio_end"]
    assert want["audio"][1][5] == eoa and len(want["audio"][0]) == 6


def test_layershift_refuses_an_adapter(tmp_path):
    mdir = tmp_path / "m"
    ref.make_model_dir(str(mdir), T=T, A=A, G=3, hidden=32, layers=2, heads=4, kv_heads=2, inter=64)
    ref.write_jsonl(tmp_path / "d.jsonl", ref.make_records(2, A=A))
    p = sft(str(mdir), str(tmp_path / "d.jsonl"), str(tmp_path / "o"), 1, ["--do_layershift", "true"], check=False)
    assert p.returncode != 0 and "do_layershift gives every audio layer its own vocabulary rows" in p.stderr, p.stderr
    cfg = json.load(open(mdir / "slam_omni.json"))
    json.dump({**cfg, "do_layershift": 1}, open(mdir / "slam_omni.json", "w"))
    p = sft(str(mdir), str(tmp_path / "d.jsonl"), str(tmp_path / "o"), 1, check=False)
    assert p.returncode != 0 and "field 'do_layershift': expected true or false" in p.stderr, p.stderr
