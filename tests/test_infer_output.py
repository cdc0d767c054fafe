"""omnishard infer --output_file never truncates what it did not write (docs/inference.md "The output file"): the
dataset itself, a model's files and a foreign file are refused and left byte for byte; an existing output is
continued only with --resume true (and only when its settings file says it was begun with the same model, dataset
and decoding options) and replaced only with --overwrite true; the file is locked while a run writes it; every
line is UTF-8 JSON; a test set needs no answers."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BIN
from oracle import slam_samples_ref as sref
from omni_run import run
from test_infer import A, MAX_NEW, infer, make


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    make(d, 3, False, (6, 3, 1))
    data = tmp_path_factory.mktemp("data") / "test.jsonl"
    sref.write_jsonl(data, sref.make_records(5, A=A, seed=3))
    return d, data


def batch(d, data, out, *extra, check=True, np_=None):
    return run(["infer", "--model", d, "--dataset", data, "--output_file", out, "--max_new_tokens", MAX_NEW, *extra],
               check=check, np_=np_, timeout=180)


def lines(path):
    """every line parsed by Python's json from strict UTF-8"""
    with open(path, encoding="utf-8", errors="strict") as f:
        text = f.read()
    assert text == "" or text.endswith("\n")
    return [json.loads(s) for s in text.splitlines()]


def untimed(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def refused(p, *words):
    assert p.returncode != 0, p.stderr
    for w in words:
        assert w in p.stderr, (w, p.stderr)


def test_the_dataset_itself_is_refused_by_inode(setup, tmp_path):
    d, data = setup
    same = tmp_path / "same.jsonl"
    shutil.copy(data, same)
    before = same.read_bytes()
    refused(batch(d, same, same, check=False), "is the dataset itself")
    link = tmp_path / "link.jsonl"   # another name of the same file
    os.link(same, link)
    refused(batch(d, same, link, "--overwrite", "true", check=False), "is the dataset itself")
    assert same.read_bytes() == before


def test_a_model_or_checkpoint_directory_is_refused(setup, tmp_path):
    d, data = setup
    weights = (d / "model.safetensors").read_bytes()
    refused(batch(d, data, d / "model.safetensors", check=False), "lies inside the model directory")
    refused(batch(d, data, d / "answers.jsonl", check=False), "lies inside the model directory")
    assert (d / "model.safetensors").read_bytes() == weights and not (d / "answers.jsonl").exists()
    ck = tmp_path / "run" / "checkpoint-500"   # a Hugging Face Trainer checkpoint (not the --model of this run)
    ck.mkdir(parents=True)
    (ck / "config.json").write_text("{}")
    refused(batch(d, data, ck / "out.jsonl", check=False), "lies inside the directory", "config.json")
    assert sorted(os.listdir(ck)) == ["config.json"]


def test_an_existing_file_is_refused_naming_what_it_holds(setup, tmp_path):
    d, data = setup
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"my": "notes"}\nmore\n')
    p = batch(d, data, notes, check=False)
    refused(p, "exists and is not an omnishard infer output", "it holds 21 bytes")
    refused(batch(d, data, notes, "--overwrite", "true", check=False), "act only on omnishard infer's own output")
    refused(batch(d, data, notes, "--resume", "true", check=False), "act only on omnishard infer's own output")
    assert notes.read_text() == '{"my": "notes"}\nmore\n' and not os.path.exists(f"{notes}.run.json")

    out = tmp_path / "out.jsonl"
    batch(d, data, out)
    first = out.read_text()
    refused(batch(d, data, out, check=False), "the lines of 5 records of an omnishard infer output", "--resume true",
            "--overwrite true")
    assert out.read_text() == first
    refused(batch(d, data, out, "--resume", "true", "--overwrite", "true", check=False), "give one of them")
    p = batch(d, data, out, "--overwrite", "true")   # an infer output: replaced
    assert untimed(lines(out)) == untimed([json.loads(s) for s in first.splitlines()])
    assert "done: 5 records" in p.stderr
    settings = json.load(open(f"{out}.run.json"))
    assert settings["model"] == os.path.realpath(d) and settings["dataset"] == os.path.realpath(data)
    assert settings["decoding"]["max_new_tokens"] == str(MAX_NEW)


def test_a_second_run_is_refused_with_the_first_ones_pid(setup, tmp_path):
    d, _ = setup
    # enough records that the first run is still decoding when it is stopped, however fast the machine (5 records
    # took 3 ms on an idle one: it could end between the settings file appearing and the SIGSTOP)
    n = 1000
    data = tmp_path / "many.jsonl"
    sref.write_jsonl(data, sref.make_records(n, A=A, seed=3))
    out = tmp_path / "out.jsonl"
    first = subprocess.Popen([str(BIN), "infer", "--model", str(d), "--dataset", str(data), "--output_file", str(out),
                              "--max_new_tokens", str(MAX_NEW)], stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.time()
        while not os.path.exists(f"{out}.run.json") and first.poll() is None and time.time() - t0 < 60:
            time.sleep(0.01)
        first.send_signal(signal.SIGSTOP)   # it holds the lock (the settings file is written under it)
        assert first.poll() is None, "the first run ended before it was stopped: " + first.stderr.read()
        second = batch(d, data, out, "--overwrite", "true", check=False)
        refused(second, f"is being written by another omnishard infer (PID {first.pid})")
        first.send_signal(signal.SIGCONT)
        # 1000 records took 105 s (CPU) and 140 s (guard backend) on 2 cores loaded by other jobs, past the old 120 s
        assert first.wait(timeout=900) == 0, first.stderr.read()
    finally:
        first.kill() if first.poll() is None else None
    assert [r["index"] for r in lines(out)] == list(range(n))   # the first run's lines alone, once each


def test_every_line_is_utf8_json_with_invalid_bytes_in_a_record(setup, tmp_path):
    d, _ = setup
    recs = sref.make_records(3, A=A, seed=4)
    data = tmp_path / "bad.jsonl"
    with open(data, "wb") as f:
        for i, r in enumerate(recs):
            line = json.dumps(r, ensure_ascii=False).encode()
            if i == 1:   # invalid UTF-8 inside a string: the record fails its checks, its error line names it
                line = line.replace(b'"source_text": "', b'"source_text": "\xff\xfe\xc3 ', 1)
            f.write(line + b"\n")
    out = tmp_path / "out.jsonl"
    batch(d, data, out, "--on_error", "skip")
    got = lines(out)   # strict UTF-8, every line JSON
    assert [r["index"] for r in got] == [0, 1, 2]
    assert "not valid UTF-8" in got[1]["error"] and "\ufffd" in got[1]["source_text"]
    assert "error" not in got[0] and "error" not in got[2]


def test_resume_refuses_another_model_dataset_or_decoding(setup, tmp_path):
    d, data = setup
    out = tmp_path / "out.jsonl"
    batch(d, data, out)
    whole = out.read_text()
    part = "".join(whole.splitlines(keepends=True)[:2])
    out.write_text(part)

    moved = tmp_path / "moved"   # the same model elsewhere: the same content, continued
    shutil.copytree(d, moved, ignore=shutil.ignore_patterns("*.jsonl"))
    other = tmp_path / "other"
    shutil.copytree(d, other, ignore=shutil.ignore_patterns("*.jsonl"))
    with open(other / "model.safetensors", "r+b") as f:   # one weight byte differs
        f.seek(-1, 2)
        b = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([b[0] ^ 1]))
    data2 = tmp_path / "data2.jsonl"
    sref.write_jsonl(data2, sref.make_records(5, A=A, seed=8))

    refused(batch(other, data, out, "--resume", "true", check=False), "another model", str(other))
    refused(batch(d, data2, out, "--resume", "true", check=False), "another dataset", str(data2))
    refused(batch(d, data, out, "--resume", "true", "--text_repetition_penalty", "1.1", check=False),
            "--text_repetition_penalty 1.1 (begun with 1.2)")
    p = batch(other, data2, out, "--resume", "true", "--max_new_tokens", 7, check=False)   # every difference at once
    refused(p, "another model", "another dataset", "--max_new_tokens 7 (begun with 12)")
    assert out.read_text() == part
    p = batch(moved, data, out, "--resume", "true")
    assert "2 of 5 records already" in p.stderr
    assert untimed(lines(out)) == untimed([json.loads(s) for s in whole.splitlines()])


def test_a_test_set_without_answers(setup, tmp_path):
    d, _ = setup
    recs = sref.make_records(4, A=A, seed=5)
    for r in recs[:2]:   # no answer at all
        del r["target_text"], r["target_token"]
    recs[2]["target_text"] = ""   # an empty one
    recs[2]["target_token"] = []
    data = tmp_path / "questions.jsonl"
    sref.write_jsonl(data, recs)
    out = tmp_path / "out.jsonl"
    batch(d, data, out)
    got = lines(out)
    assert [r["index"] for r in got] == [0, 1, 2, 3] and all("error" not in r for r in got)
    assert got[0]["target_text"] is None and got[2]["target_text"] == ""
    for i, row in enumerate(got):   # the answer a single record's run gives; the answer never enters the prompt
        single = infer(d, "--dataset", data, "--index", i, "--max_new_tokens", MAX_NEW, "--show_prompt")
        assert single["text_ids"] == row["text_ids"] and single["audio"] == row["audio"], i
    with_answer = infer(d, "--dataset", data, "--index", 3, "--max_new_tokens", MAX_NEW, "--show_prompt")
    recs[3].pop("target_text"), recs[3].pop("target_token")
    sref.write_jsonl(data, recs)
    assert infer(d, "--dataset", data, "--index", 3, "--max_new_tokens", MAX_NEW, "--show_prompt") == with_answer


def test_resume_after_fixing_later_records_of_the_dataset(setup, tmp_path):
    """the documented --on_error stop workflow: records after those already decoded are fixed, the file continues;
    a change to a record whose line is kept is another dataset"""
    d, _ = setup
    recs = sref.make_records(5, A=A, seed=3)
    data = tmp_path / "test.jsonl"
    sref.write_jsonl(data, recs)
    out = tmp_path / "out.jsonl"
    batch(d, data, out)
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:2]))
    recs[4]["source_text"] = "<USER>: A fixed question?"
    sref.write_jsonl(data, recs)
    p = batch(d, data, out, "--resume", "true")
    assert "the dataset has changed since" in p.stderr and "2 of 5 records already" in p.stderr
    assert [r["source_text"] for r in lines(out)] == [r["source_text"] for r in recs]
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:2]))
    recs[1]["source_text"] = "<USER>: Another question?"
    sref.write_jsonl(data, recs)
    refused(batch(d, data, out, "--resume", "true", check=False), "another dataset", "record 1",
            "its source_text differs")
