"""omnishard infer --dataset FILE --output_file OUT: every record decoded, one JSON line each (docs/inference.md
"A whole test set"). Every line must equal what single-record omnishard infer (--index I, itself checked against the
reference in tests/test_infer.py) prints for that record; a resumed run writes nothing twice or half."""
import json

import pytest

from oracle import slam_samples_ref as sref
from omni_run import run
from test_infer import A, MAX_NEW, QUESTION, infer, make

EXTRA = ("key", "source_text", "target_text", "index", "line", "task", "stop", "text_tokens", "audio_positions", "seconds")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("G3")
    make(d, 3, False, (6, 3, 1))   # for QUESTION: eoa (layer 1) at step 3, eot at step 6
    recs = sref.make_records(5, A=A, seed=3)
    recs[0]["source_text"] = QUESTION
    recs[1]["task_type"] = "tts"
    recs[2]["key"] = 7
    del recs[3]["key"]
    recs[4]["source_text"] = "USER: Hello there. ASSISTANT: Hi! " + recs[4]["source_text"]
    data = d / "test.jsonl"
    sref.write_jsonl(data, recs)
    return d, recs, data


def lines(path):
    with open(path) as f:
        text = f.read()
    assert text.endswith("\n")
    return [json.loads(s) for s in text.splitlines()]


def batch(d, data, out, *extra, np_=None):
    return run(["infer", "--model", d, "--dataset", data, "--output_file", out, "--max_new_tokens", MAX_NEW, *extra],
               np_=np_, timeout=180)


def without_time(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_every_line_is_the_single_answer(setup, tmp_path):
    d, recs, data = setup
    out = tmp_path / "out.jsonl"
    p = batch(d, data, out)
    got = lines(out)
    assert len(got) == len(recs)
    for i, (row, rec) in enumerate(zip(got, recs)):
        single = infer(d, "--dataset", data, "--index", i, "--max_new_tokens", MAX_NEW)
        assert {k: v for k, v in row.items() if k not in EXTRA} == single, i
        assert row["index"] == i and row["line"] == i + 1 and row["key"] == rec.get("key")
        assert row["task"] == rec.get("task_type", "s2s")
        assert row["source_text"] == rec["source_text"] and row["target_text"] == rec["target_text"]
        assert row["text_tokens"] == len(row["text_ids"]) and row["audio_positions"] == len(row["audio"][0])
        ended = row["text_end"] and row["audio_end"]
        assert row["stop"] in (("eot", "eoa") if ended else ("max_new_tokens",))
        assert row["seconds"] >= 0
    assert got[0]["stop"] == "eot" and got[0]["steps"] == 7   # eoa at step 3, eot at step 6 (the forced stops)
    assert "5/5 records" in p.stderr and "records/s" in p.stderr and "tokens/s" in p.stderr and "ETA" in p.stderr
    assert "done: 5 records" in p.stderr and "stop: eot" in p.stderr


def test_resume_writes_nothing_twice(setup, tmp_path):
    d, recs, data = setup
    full = tmp_path / "full.jsonl"
    batch(d, data, full)
    want = open(full).read().splitlines(keepends=True)
    out = tmp_path / "out.jsonl"
    with open(out, "w") as f:   # a killed run: two whole lines and half of the third
        f.write(want[0] + want[1] + want[2][: len(want[2]) // 2])
    p = batch(d, data, out, "--resume", "true")
    assert "2 of 5 records already" in p.stderr and "done: 3 records" in p.stderr
    assert without_time(lines(out)) == without_time(lines(full))
    p = batch(d, data, out, "--resume", "true")   # complete: nothing more
    assert "done: 0 records" in p.stderr and without_time(lines(out)) == without_time(lines(full))
    batch(d, data, out)   # without --resume: written anew
    assert without_time(lines(out)) == without_time(lines(full))


def test_two_ranks_same_lines(setup, tmp_path):
    d, _, data = setup
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    batch(d, data, one)
    p = batch(d, data, two, np_=2)   # ZeRO-3 (the default under mpirun): every rank decodes every record together
    assert "split over" not in p.stderr and without_time(lines(two)) == without_time(lines(one))


@pytest.mark.parametrize("np_,stage", [(2, 0), (3, 0), (2, 2)])
def test_records_split_over_ranks(setup, tmp_path, np_, stage):
    """--zero_stage 0-2 under mpirun: each rank decodes its own records alone (5 records: the last round is short at
    3 ranks), rank 0 writes them in dataset order: the lines 1 rank writes"""
    d, _, data = setup
    one, many = tmp_path / "one.jsonl", tmp_path / "many.jsonl"
    batch(d, data, one)
    p = batch(d, data, many, "--zero_stage", stage, np_=np_)
    assert without_time(lines(many)) == without_time(lines(one))
    assert "done: 5 records" in p.stderr and "5/5 records" in p.stderr
    assert f"split over {np_} ranks" in p.stderr
    with open(many, "w") as f:   # resumed after 1 line: the rounds start at record 1
        f.write(open(one).read().splitlines(keepends=True)[0])
    p = batch(d, data, many, "--zero_stage", stage, "--resume", "true", np_=np_)
    assert "done: 4 records" in p.stderr and without_time(lines(many)) == without_time(lines(one))


@pytest.mark.parametrize("args,message", [
    (["--question", "hi", "--output_file", "o.jsonl"], "--output_file: only with --dataset"),
    (["--dataset", "DATA", "--index", "1", "--output_file", "o.jsonl"], "without --index"),
    (["--dataset", "DATA", "--resume", "true"], "--resume: only with --output_file"),
])
def test_errors(setup, args, message):
    d, _, data = setup
    p = infer(d, *[str(data) if a == "DATA" else a for a in args], check=False)
    assert p.returncode == 2 and message in p.stderr


def test_resume_refuses_another_file(setup, tmp_path):
    d, _, data = setup
    out = tmp_path / "other.jsonl"
    out.write_text('{"index": 0}\n{"index": 5}\n')
    p = run(["infer", "--model", d, "--dataset", data, "--output_file", out, "--resume", "true"], check=False)
    assert p.returncode == 1 and f"{out}:2: not line 2 of this run" in p.stderr
    assert out.read_text() == '{"index": 0}\n{"index": 5}\n'


def test_spoken_questions(tmp_path):
    """records with spoken questions (s2s and asr, tiny Whisper encoder) among text ones: every line equals the
    single-record answer (itself checked against the reference in tests/test_infer.py), at 1 rank, with the
    records split over 2 ranks (each rank's speech path alone) and 3 at once (--infer_batch_size 3: each record's
    speech path with its own prefill)"""
    import wave
    import numpy as np
    from oracle import slam_omni_ref as ref
    d = tmp_path / "m"
    sref.make_model_dir(str(d), T=512, A=A, G=3, hidden=32, layers=2, heads=4, kv_heads=2, inter=64, tied=True, seed=1)
    ref.add_projector(str(d), 16, 24, 32)
    ref.make_encoder(str(tmp_path / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    for k, hz in enumerate((440, 300)):
        x = 0.5 * np.sin(2 * np.pi * hz * np.arange(8000 + 1600 * k) / 16000)
        with wave.open(str(tmp_path / f"q{k}.wav"), "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
            w.writeframes((x * 32767).astype("<i2").tobytes())
    recs = sref.make_records(4, A=A, seed=5)
    recs[0]["source_wav"] = "q0.wav"
    recs[2].update(source_wav="q1.wav", task_type="asr")
    recs[3]["source_wav"] = "q1.wav"
    data = tmp_path / "data.jsonl"
    sref.write_jsonl(data, recs)
    enc = ["--speech_encoder", tmp_path / "enc", "--max_new_tokens", 5]
    singles = [infer(d, "--dataset", data, "--index", i, *enc) for i in range(4)]
    for np_, extra in ((None, []), (2, ["--zero_stage", "0"]), (None, ["--infer_batch_size", "3"])):
        out = tmp_path / f"out{np_}.jsonl"
        run(["infer", "--model", d, "--dataset", data, "--output_file", out, *enc, *extra], np_=np_, timeout=180)
        got = lines(out)
        assert [{k: v for k, v in r.items() if k not in EXTRA} for r in got] == singles, np_
        assert [r["task"] for r in got] == ["s2s", "s2s", "asr", "s2s"] and got[2]["text_only"]
