"""omnishard infer --dataset FILE --output_file OUT: every record decoded, one JSON line each (docs/inference.md
"A whole test set"). Every line must equal what single-record omnishard infer (--index I, itself checked against the
reference in tests/test_infer.py) prints for that record; a resumed run writes nothing twice or half."""
import json
import shutil

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
    with open(out, "w") as f:   # a killed run: two whole lines and half of the third (and its settings file)
        f.write(want[0] + want[1] + want[2][: len(want[2]) // 2])
    shutil.copy(f"{full}.run.json", f"{out}.run.json")
    p = batch(d, data, out, "--resume", "true")
    assert "2 of 5 records already" in p.stderr and "done: 3 records" in p.stderr
    assert without_time(lines(out)) == without_time(lines(full))
    p = batch(d, data, out, "--resume", "true")   # complete: nothing more
    assert "done: 0 records" in p.stderr and without_time(lines(out)) == without_time(lines(full))
    batch(d, data, out, "--overwrite", "true")   # written anew
    assert without_time(lines(out)) == without_time(lines(full))


def test_two_ranks_same_lines(setup, tmp_path):
    d, _, data = setup
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    batch(d, data, one)
    p = batch(d, data, two, np_=2)   # ZeRO-3 (the default under mpirun): the records split, the ranks in lockstep
    assert "split over 2 ranks" in p.stderr and "ZeRO-3" in p.stderr
    assert without_time(lines(two)) == without_time(lines(one))


@pytest.mark.parametrize("np_,stage", [(2, 0), (3, 0), (2, 2), (3, 3)])
def test_records_split_over_ranks(setup, tmp_path, np_, stage):
    """under mpirun each rank decodes its own records (alone at ZeRO 0-2; at ZeRO-3 every rank in every forward's
    gathers, a rank without a record in the short last round too: 5 records at 3 ranks), rank 0 writes them in
    dataset order: the lines 1 rank writes"""
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
    (["--dataset", "DATA", "--on_error", "skip"], "--on_error: only with --output_file"),
    (["--dataset", "DATA", "--speech_batch_size", "4"], "--speech_batch_size: only with --output_file"),
    (["--dataset", "DATA", "--output_file", "o.jsonl", "--on_error", "ignore"], "--on_error"),
    (["--dataset", "DATA", "--output_file", "o.jsonl", "--speech_batch_size", "0"], "--speech_batch_size"),
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


def write_wav(path, hz, n):
    import wave
    import numpy as np
    x = 0.5 * np.sin(2 * np.pi * hz * np.arange(n) / 16000)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes((x * 32767).astype("<i2").tobytes())


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
        out = tmp_path / f"out{np_}-{len(extra)}.jsonl"
        run(["infer", "--model", d, "--dataset", data, "--output_file", out, *enc, *extra], np_=np_, timeout=180)
        got = lines(out)
        assert [{k: v for k, v in r.items() if k not in EXTRA} for r in got] == singles, np_
        assert [r["task"] for r in got] == ["s2s", "s2s", "asr", "s2s"] and got[2]["text_only"]


@pytest.fixture(scope="module")
def bad(setup, tmp_path_factory):
    """the model of setup allowing prompts of at most 400 positions, and a dataset of 4 good records and 5 bad
    ones: malformed JSON (line 3), a wrong field type (5), a missing WAV (6), a prompt longer than the model allows
    (7), a spoken question for a model without a speech encoder (9); clean: the good ones alone"""
    import shutil
    src, recs, _ = setup
    d = tmp_path_factory.mktemp("bad")
    shutil.copytree(src, d / "m")
    m = d / "m"
    good = recs[:4]
    clean = d / "clean.jsonl"
    sref.write_jsonl(clean, good)
    most = 400   # more than the good records' prompts and the spoken one's (300 speech positions)
    assert max(infer(m, "--dataset", clean, "--index", i, "--max_new_tokens", 1)["prompt_positions"] for i in range(4)) < most
    cfg = json.loads((m / "config.json").read_text())
    cfg["max_position_embeddings"] = most
    (m / "config.json").write_text(json.dumps(cfg))
    long = dict(recs[0], key="long", source_text="<USER>: " + " ".join(["word"] * (2 * most)))
    rows = [json.dumps(good[0]), json.dumps(good[1]), '{"key": "broken", "source_text": ',
            json.dumps(good[2]), json.dumps(dict(recs[0], key="typed", source_text=5)),
            json.dumps(dict(recs[0], key="nowav", source_wav="missing.wav")), json.dumps(long), json.dumps(good[3]),
            json.dumps(dict(recs[0], key="spoken", source_wav="q.wav"))]
    write_wav(d / "q.wav", 440, 8000)
    data = d / "data.jsonl"
    data.write_text("\n".join(rows) + "\n")
    return m, data, clean


BAD = {2: ("broken", ":3: malformed JSON"), 4: ("typed", ":5: field 'source_text': expected a string"),
       5: ("nowav", ":6: field 'source_wav': cannot read 'missing.wav'"),
       6: ("long", ":7: the prompt has "), 8: ("spoken", ":9: the spoken question: sample 8: has a speech input")}


def without_place(rows):
    return [{k: v for k, v in r.items() if k not in ("seconds", "index", "line")} for r in rows]


@pytest.mark.parametrize("np_,stage,B", [(None, None, 1), (2, 3, 1), (2, 0, 1), (None, None, 3), (2, 0, 2), (2, 3, 2)])
def test_on_error_skip(bad, tmp_path, np_, stage, B):
    """--on_error skip: every bad record (malformed JSON, a wrong field type, a missing WAV, a prompt longer than
    max_position_embeddings, a spoken question the model cannot hear) gets an error line naming FILE:LINE with its key, index and line, in dataset order; the
    good records' lines are those of a file without the bad ones; at 2 ranks (ZeRO-3 lockstep, ZeRO-0 alone) the
    same lines, and so with --infer_batch_size B (the bad records left out of the batched engine); resumed after the
    first error line, the same file"""
    m, data, clean = bad
    want = tmp_path / "clean.jsonl"
    batch(m, clean, want)
    out = tmp_path / "out.jsonl"
    stage_args = (["--zero_stage", stage] if stage is not None else []) + ["--infer_batch_size", B]
    p = batch(m, data, out, "--on_error", "skip", *stage_args, np_=np_)
    got = lines(out)
    assert [r["index"] for r in got] == list(range(9)) and [r["line"] for r in got] == list(range(1, 10))
    for i, (key, message) in BAD.items():
        assert set(got[i]) == {"key", "source_text", "target_text", "index", "line", "error"}, got[i]
        assert got[i]["key"] == (None if key == "broken" else key)
        assert got[i]["error"].startswith(f"{data}{message}"), got[i]["error"]
        assert f"{data}{message}" in p.stderr
    assert "max_position_embeddings" in got[6]["error"]
    assert without_place([got[i] for i in (0, 1, 3, 7)]) == without_place(lines(want))
    assert "done: 9 records" in p.stderr and "errors 5" in p.stderr and "3 of 9 records" in p.stderr
    with open(out, "w") as f:   # resumed after the first error line
        f.write(open(want).read().splitlines(keepends=True)[0])
        f.write(json.dumps(got[1]) + "\n" + json.dumps(got[2]) + "\n")
    p = batch(m, data, out, "--on_error", "skip", "--resume", "true", *stage_args, np_=np_)
    assert "done: 6 records" in p.stderr and without_time(lines(out)) == without_time(got)


@pytest.mark.parametrize("np_,stage", [(None, None), (2, 3), (2, 0)])
def test_on_error_stop(bad, tmp_path, np_, stage):
    """--on_error stop (the default): the lines before the first bad record are written, every rank ends with exit
    1 naming its FILE:LINE; fixed (here: skipped) and resumed, the run goes on from it"""
    m, data, _ = bad
    stage_args = ["--zero_stage", stage] if stage is not None else []
    full = tmp_path / "full.jsonl"
    batch(m, data, full, "--on_error", "skip", *stage_args, np_=np_)
    out = tmp_path / "out.jsonl"
    p = run(["infer", "--model", m, "--dataset", data, "--output_file", out, "--max_new_tokens", MAX_NEW, *stage_args],
            np_=np_, check=False, timeout=180)
    assert p.returncode == 1, p.stderr
    assert f"{data}:3: malformed JSON" in p.stderr and f"stopped at record 2, {data}:3" in p.stderr
    assert without_time(lines(out)) == without_time(lines(full)[:2])
    p = batch(m, data, out, "--on_error", "skip", "--resume", "true", *stage_args, np_=np_)
    assert "2 of 9 records already" in p.stderr and without_time(lines(out)) == without_time(lines(full))


def test_spoken_batched_and_split_in_lockstep(tmp_path):
    """records of different lengths (G = 1, text stop at step 3, audio at 5: asr records end at step 3, one s2s record
    runs to --max_new_tokens), spoken ones among them: the spoken questions of 1, 3 or 8 (the default) records at
    once through the encoder and the projector write the same lines, each the single-record answer; split over 2
    and 3 ranks at ZeRO-3 (a rank whose record ended runs on in the other ranks' gathers; over 3 also B = 2 at once,
    the batched engine in lockstep) and over 2 at ZeRO-0, the lines of 1 rank"""
    from oracle import slam_omni_ref as ref
    from test_infer import make
    d = tmp_path / "m"
    d.mkdir()
    make(d, 1, False, (3, 5, 0))
    ref.add_projector(str(d), 16, 24, 32)
    ref.make_encoder(str(tmp_path / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    for k, hz in enumerate((440, 300, 520)):
        write_wav(tmp_path / f"q{k}.wav", hz, 8000 + 1600 * k)
    recs = sref.make_records(7, A=A, seed=5)
    recs[1]["source_wav"] = "q0.wav"
    recs[2].update(source_wav="q1.wav", task_type="asr")
    recs[4]["source_wav"] = "q2.wav"
    recs[5].update(source_wav="q0.wav", task_type="asr")
    data = tmp_path / "data.jsonl"
    sref.write_jsonl(data, recs)
    enc = ["--speech_encoder", tmp_path / "enc"]
    singles = [infer(d, "--dataset", data, "--index", i, "--max_new_tokens", MAX_NEW, *enc) for i in range(7)]
    want = None
    for size in (1, 3, None):
        out = tmp_path / f"out{size}.jsonl"
        batch(d, data, out, *enc, *(["--speech_batch_size", size] if size else []))
        got = without_time(lines(out))
        assert [{k: v for k, v in r.items() if k not in EXTRA} for r in got] == singles, size
        want = want or got
        assert got == want, size
    assert len({r["steps"] for r in want}) == 3 and [r["task"] for r in want] == ["s2s", "s2s", "asr", "s2s", "s2s", "asr", "s2s"]
    for np_, stage, size, B in ((2, 3, 2, 1), (3, 3, 1, 1), (2, 0, 3, 1), (3, 3, 1, 2)):
        out = tmp_path / f"many{np_}{stage}{B}.jsonl"
        p = batch(d, data, out, *enc, "--zero_stage", stage, "--speech_batch_size", size, "--infer_batch_size", B,
                  np_=np_)
        assert without_time(lines(out)) == want, (np_, stage)
        assert f"split over {np_} ranks" in p.stderr
