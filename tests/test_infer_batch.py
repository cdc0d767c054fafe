"""omnishard infer --dataset FILE --output_file OUT --infer_batch_size B: B records decoded at once, each with its
own KV cache and stopping on its own (docs/inference.md "Batched decoding"). Every line must equal what B = 1 writes
(one record at a time, itself checked line by line against single-record --index output in
tests/test_infer_dataset.py and against the PyTorch reference in tests/test_infer.py): the same tokens, stop
reasons and counts, in dataset order; resumed and over ranks too."""
import json
import shutil

import pytest
import torch
from tokenizers import Tokenizer

import test_infer as ti
from oracle import slam_infer_ref as iref
from oracle import slam_samples_ref as sref
from omni_run import run
from test_infer import A, QUESTION, T, infer

MODELS = {   # name: (G, tied, forced stops on QUESTION (text step, audio step, layer) or None, seed, max_new_tokens)
    "G3-adapter": (3, False, (8, 4, 2), 1, 12),   # eoa after 6 and 9 steps, eot after 9, max_new_tokens
    "G3-adapter-cut": (3, False, (8, 4, 2), 1, 8),   # the same model cut at 8 steps
    "G1": (1, False, (3, 5, 0), 0, 12),           # no adapter: eoa after 5 and 6 steps
    "G3-tied": (3, True, None, 0, 10),            # nothing ends: max_new_tokens
    "G3-layershift-latency": (3, False, None, 2, 10),   # layer shift (no adapter), audio held back for 2 steps
}


def make_model(d, G, tied, stops, seed, **kw):
    """test_infer.make's tiny model with its attention weights scaled up, so that the answers depend on the prompt
    (other tokens and stops for other records), the stops forced on QUESTION's trajectory"""
    model, adapter = sref.make_model_dir(str(d), T=T, A=A, G=G, hidden=32, layers=2, heads=4, kv_heads=2, inter=64,
                                         tied=tied, seed=seed, **kw)
    with torch.no_grad():
        model.lm_head.weight.mul_(10.0)
        for layer in model.model.layers:
            for lin in ("q_proj", "k_proj", "v_proj", "o_proj"):
                getattr(layer.self_attn, lin).weight.mul_(4.0)
    ids, _, _ = iref.prompt({"source_text": QUESTION}, Tokenizer.from_file(str(d / "tokenizer.json")), T, A, G)
    if stops:
        kt, ka, layer = stops
        if ka < kt:   # the earlier stop first (as test_infer.make)
            ti.stop_audio_at(model, adapter, ids, G, ka, layer)
            ti.stop_text_at(model, adapter, ids, G, kt)
        else:
            ti.stop_text_at(model, adapter, ids, G, kt)
            ti.stop_audio_at(model, adapter, ids, G, ka, layer)
    ti.save(str(d), model, adapter)


def records():
    """6 records of different prompt lengths: text questions, one with history, one tts, QUESTION twice"""
    recs = sref.make_records(6, A=A, seed=3)
    recs[1]["source_text"] = QUESTION
    recs[4]["source_text"] = QUESTION
    recs[2]["task_type"] = "tts"
    recs[3]["source_text"] = "USER: Hello there. ASSISTANT: Hi! " + recs[3]["source_text"]
    return recs


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = {}
    for name, (G, tied, stops, seed, _) in MODELS.items():
        d = tmp_path_factory.mktemp(name)
        if name.endswith("-cut"):
            d = out[name[:-4]][0]   # the same model
        else:
            shift = dict(layershift=True, latency=2) if "layershift" in name else {}
            make_model(d, G, tied, stops, seed, **shift)
            sref.write_jsonl(d / "test.jsonl", records())
        out[name] = (d, d / "test.jsonl")
    return out


def lines(path):
    with open(path) as f:
        text = f.read()
    assert text.endswith("\n")
    return [{k: v for k, v in json.loads(s).items() if k != "seconds"} for s in text.splitlines()]


def decode(d, data, out, B, *extra, np_=None, check=True, env=None):
    return run(["infer", "--model", d, "--dataset", data, "--output_file", out, "--infer_batch_size", B, *extra],
               np_=np_, timeout=180, check=check, env=env)


def summary(stderr):
    return [s for s in stderr.splitlines() if "done:" in s][0].split("decoded into")[1].split(" ", 2)[2]


@pytest.mark.parametrize("name", list(MODELS))
def test_batches_equal_one_at_a_time(models, tmp_path, name):
    """B = 2, 4 and 8 (more slots than records: some stay idle) write what B = 1 writes, token for token"""
    d, data = models[name]
    new = ["--max_new_tokens", MODELS[name][4]]
    one = tmp_path / "one.jsonl"
    p1 = decode(d, data, one, 1, *new)
    want = lines(one)
    assert [r["index"] for r in want] == list(range(6))
    for B in (2, 4, 8):
        out = tmp_path / f"b{B}.jsonl"
        p = decode(d, data, out, B, *new)
        assert lines(out) == want, (name, B)
        assert summary(p.stderr) == summary(p1.stderr) and "6/6 records" in p.stderr


def test_the_cases_cover_lengths_and_stops(models, tmp_path):
    """what the cases above decode: ragged prompts, records that end at different steps (slots refilled while others
    go on), answers that differ between records, each stop reason, text and audio"""
    stops, steps, prompts, texts = set(), set(), set(), set()
    for name, (d, data) in models.items():
        out = tmp_path / f"{name}.jsonl"
        decode(d, data, out, 1, "--max_new_tokens", MODELS[name][4])
        rows = lines(out)
        stops |= {r["stop"] for r in rows}
        steps |= {(name, r["steps"]) for r in rows}
        prompts |= {r["prompt_positions"] for r in rows}
        texts |= {(name, tuple(r["text_ids"])) for r in rows}
        assert any(r["text_ids"] for r in rows) and all(r["audio"][0] for r in rows)
    assert stops == {"eot", "eoa", "max_new_tokens"} and len(prompts) >= 5
    assert {("G3-adapter", 6), ("G3-adapter", 9), ("G3-adapter", 12), ("G1", 5), ("G1", 6)} <= steps
    assert all(len({t for n, t in texts if n == name}) >= 3 for name in ("G3-adapter", "G3-tied"))


def test_text_only(models, tmp_path):
    d, data = models["G3-adapter"]
    one, many = tmp_path / "one.jsonl", tmp_path / "many.jsonl"
    decode(d, data, one, 1, "--text_only", "--max_new_tokens", 12)
    decode(d, data, many, 3, "--text_only", "--max_new_tokens", 12)
    assert lines(many) == lines(one) and all(r["text_only"] and r["audio"][0] == [] for r in lines(one))


def test_sampling_seed_is_per_record(models, tmp_path):
    """sampling: each record draws as a single answer with the same --seed does (keyed by the seed, the record's own
    step and stream; not by its slot), so B does not change the tokens"""
    d, data = models["G3-tied"]
    opts = ["--max_new_tokens", 10, "--do_sample", "true", "--temperature", 2.0, "--top_k", 50, "--seed", 7]
    one, many, greedy = tmp_path / "one.jsonl", tmp_path / "many.jsonl", tmp_path / "greedy.jsonl"
    decode(d, data, one, 1, *opts)
    decode(d, data, many, 4, *opts)
    decode(d, data, greedy, 1, "--max_new_tokens", 10)
    want = lines(one)
    assert lines(many) == want
    assert [r["text_ids"] for r in want] != [r["text_ids"] for r in lines(greedy)]   # the draws did something
    single = infer(d, "--dataset", data, "--index", 3, *opts)
    assert {k: v for k, v in want[3].items() if k in single} == single
    decode(d, data, many, 4, *opts[:-1], 8, "--overwrite", "true")
    assert lines(many) != want   # another seed, other draws


def test_resume_with_batches(models, tmp_path):
    d, data = models["G3-adapter"]
    full = tmp_path / "full.jsonl"
    decode(d, data, full, 1, "--max_new_tokens", 12)
    want = open(full).read().splitlines(keepends=True)
    out = tmp_path / "out.jsonl"
    with open(out, "w") as f:   # a killed run: two whole lines and half of the third (and its settings file)
        f.write(want[0] + want[1] + want[2][: len(want[2]) // 2])
    shutil.copy(f"{full}.run.json", f"{out}.run.json")
    p = decode(d, data, out, 3, "--max_new_tokens", 12, "--resume", "true")
    assert "2 of 6 records already" in p.stderr and "done: 4 records" in p.stderr
    assert lines(out) == lines(full)


@pytest.mark.parametrize("np_,stage,B", [(2, 0, 2), (3, 2, 4), (2, 3, 3), (3, 3, 2), (4, 3, 2)])
def test_ranks(models, tmp_path, np_, stage, B):
    """under mpirun the records split over the ranks, each rank decoding its own B at once (rounds of 4 B per rank):
    alone at ZeRO 0-2, in lockstep at ZeRO-3 (the ranks' prefills and decode forwards aligned, pad forwards on a rank
    with fewer; the records' prompts and stops differ, so the ranks' sequences end at different steps; 4 ranks: two
    ranks have 2 records, two have 1); either way the lines of 1 rank at B = 1; resumed after one line"""
    d, data = models["G3-adapter"]
    one, many = tmp_path / "one.jsonl", tmp_path / "many.jsonl"
    decode(d, data, one, 1, "--max_new_tokens", 12)
    p = decode(d, data, many, B, "--max_new_tokens", 12, "--zero_stage", stage, np_=np_)
    assert lines(many) == lines(one) and "done: 6 records" in p.stderr
    assert f"split over {np_} ranks" in p.stderr
    with open(many, "w") as f:
        f.write(open(one).read().splitlines(keepends=True)[0])
    p = decode(d, data, many, B, "--max_new_tokens", 12, "--zero_stage", stage, "--resume", "true", np_=np_)
    assert "done: 5 records" in p.stderr and lines(many) == lines(one)


def test_guard_backend(models, tmp_path):
    """on the guard backend (--device guard: the backend's memory out of the host's reach outside its
    calls, as a device's) the batched step (per-sequence caches, the head's rows downloaded) writes the same lines"""
    d, data = models["G3-adapter"]
    one, many = tmp_path / "one.jsonl", tmp_path / "many.jsonl"
    decode(d, data, one, 1, "--max_new_tokens", 12)
    decode(d, data, many, 4, "--max_new_tokens", 12, "--device", "guard")
    assert lines(many) == lines(one)


@pytest.mark.parametrize("args,message", [
    (["--infer_batch_size", "0"], "--infer_batch_size: expected a value in [1,256], got '0'"),
    (["--infer_batch_size", "-2"], "--infer_batch_size: expected a value in [1,256], got '-2'"),
    (["--infer_batch_size", "257"], "--infer_batch_size: expected a value in [1,256], got '257'"),
    (["--infer_batch_size", "2", "--kv_cache", "false"], "--infer_batch_size 2: needs --kv_cache true"),
    (["--infer_batch_size", "2", "--question", "hi"], "--infer_batch_size 2: only with --dataset and --output_file"),
])
def test_errors(models, tmp_path, args, message):
    d, data = models["G1"]
    base = ["--dataset", data, "--output_file", tmp_path / "o.jsonl"] if "--question" not in args else []
    p = run(["infer", "--model", d, *base, *args], check=False)
    assert p.returncode == 2 and message in p.stderr, p.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_help():
    p = run(["infer", "--help"])
    assert "--infer_batch_size" in p.stdout and "[1,256]" in p.stdout
