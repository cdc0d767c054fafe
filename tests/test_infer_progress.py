"""A single answer shows its progress on stderr (docs/inference.md "Progress"): on a terminal a live line with a
bar, tokens, tokens/s and the text so far; at the end why generation stopped, consistent with the answer. ms-swift's
infer spellings --val_dataset, --result_path, --max_batch_size are the same options as omnishard's."""
import json
import os
import pty
import re
import subprocess

import pytest
from tokenizers import Tokenizer

from conftest import BIN
from oracle import slam_samples_ref as sref
from omni_run import run
from test_infer import A, QUESTION, make


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    stops = tmp_path_factory.mktemp("stops")
    make(stops, 3, False, (6, 3, 1))   # for QUESTION: eoa at step 3, eot at step 6
    free = tmp_path_factory.mktemp("free")
    make(free, 3, False, None)   # no forced stop
    return stops, free


def stop_line(err):
    m = re.search(r"omnishard infer: stop: (\w+) \((.*?); (\d+) of at most (\d+) tokens, [\d.]+ tokens/s\)", err)
    assert m, err
    return m.group(1), int(m.group(3)), int(m.group(4))


def test_the_stop_reason_is_printed(models):
    stops, free = models
    p = run(["infer", "--model", stops, "--question", QUESTION, "--max_new_tokens", 12])
    ans = json.loads(p.stdout)
    assert ans["text_end"] and ans["audio_end"]
    assert stop_line(p.stderr) == ("eot", ans["steps"], 12)   # eoa at step 3, eot at step 6: eot ended last
    p = run(["infer", "--model", stops, "--question", QUESTION, "--max_new_tokens", 5])
    assert stop_line(p.stderr) == ("max_new_tokens", 5, 5) and not json.loads(p.stdout)["text_end"]


def test_a_terminal_gets_a_live_line_with_the_text_so_far(models):
    _, free = models
    master, slave = pty.openpty()   # stderr is a terminal; stdout a pipe
    p = subprocess.Popen([str(BIN), "infer", "--model", str(free), "--question", QUESTION, "--max_new_tokens", "40"],
                         stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    out, _ = p.communicate(timeout=120)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    assert p.returncode == 0, err
    err = err.decode("utf-8", "replace")
    lives = re.findall(r"\r\x1b\[Komnishard infer: \[([#.]{20})\] (\d+)/40 tokens, [\d.]+ tokens/s: ([^\r\n]*)", err)
    assert lives, err
    ans = json.loads(out)
    tok = Tokenizer.from_file(str(free / "tokenizer.json"))
    text = tok.decode(ans["text_ids"], skip_special_tokens=True).replace("\n", " ")
    for bar, steps, shown in lives:
        assert bar.count("#") == int(steps) * 20 // 40
        assert shown.strip() == "" or shown.rstrip("\ufffd") in text, (shown, text)   # a piece of the answer so far
    assert stop_line(err)[1:] == (ans["steps"], 40)


def test_help_says_what_max_new_tokens_means_in_seconds_of_speech():
    p = run(["infer", "--help"])
    assert "180 s for the default at G = 3" in p.stdout and "default 3000" in p.stdout


def test_ms_swift_infer_spellings(models, tmp_path):
    stops, _ = models
    data = tmp_path / "test.jsonl"
    sref.write_jsonl(data, sref.make_records(3, A=A, seed=3))
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    run(["infer", "--model", stops, "--dataset", data, "--output_file", one, "--infer_batch_size", 2,
         "--max_new_tokens", 8])
    run(["infer", "--model", stops, "--val_dataset", data, "--result_path", two, "--max-batch-size=2",
         "--max_new_tokens", 8])
    strip = lambda f: [{k: v for k, v in json.loads(s).items() if k != "seconds"} for s in open(f)]
    assert strip(two) == strip(one)
    p = run(["infer", "--help"])
    assert "--val_dataset, --dataset" in p.stdout and "--result_path, --output_file" in p.stdout
    assert "--max_batch_size, --infer_batch_size" in p.stdout


def test_ms_swift_infer_options_say_what_to_pass(models):
    """`swift infer --adapters CKPT` is refused naming --model CKPT (a checkpoint holds its base and adapter); --stream
    and --infer_backend are accepted with a note each and change nothing (the same answer)"""
    stops, _ = models
    p = run(["infer", "--model", stops, "--adapters", stops, "--question", QUESTION], check=False)
    assert p.returncode == 2 and not p.stdout, p.stderr
    assert ("unknown option '--adapters' (ms-swift's; not in omnishard): a checkpoint holds its base model and its "
            "LoRA adapter: pass --model OUTPUT_DIR/checkpoint-STEP") in p.stderr, p.stderr
    plain = run(["infer", "--model", stops, "--question", QUESTION, "--max_new_tokens", 12])
    p = run(["infer", "--model", stops, "--question", QUESTION, "--max_new_tokens", 12, "--stream", "true",
             "--infer-backend=pt"])
    strip = lambda s: {k: v for k, v in json.loads(s).items() if k != "seconds"}
    assert strip(p.stdout) == strip(plain.stdout)
    for name in ("stream", "infer_backend"):
        assert p.stderr.count(f"omnishard infer: --{name} accepted, no effect here: ") == 1, p.stderr
