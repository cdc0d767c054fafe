"""The OMNISHARD_* variables (src/core/knobs.c, docs/operations.md "Environment variables"): read once, checked
before any command starts (every bad value named at once, exit 2), and listed in the run's start-up settings."""
import json
import os
import subprocess

from conftest import BIN
from omni_run import run, tiny_slam


def bare_env(**kv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNISHARD_") or k == "OMNISHARD_BUILD"}
    env.update(kv)
    return env


def test_bad_values_stop_every_command_at_start(tmp_path):
    """before, tokenize never looked at OMNISHARD_LOGITS_ROWS or OMNISHARD_FAULT, a bad OMNISHARD_LOG_SAMPLES
    meant 'off', and the kernel that read OMNISHARD_LOGITS_ROWS stopped the program from inside a step"""
    env = bare_env(OMNISHARD_LOGITS_ROWS="many", OMNISHARD_LOG_SAMPLES="yes", OMNISHARD_FAULT="1",
                   OMNISHARD_TOK_RANGES="2")
    for cmd in (["tokenize", "--tokenizer", str(tmp_path / "none.json")], ["plan", "--model", "qwen2.5-0.5b"]):
        p = subprocess.run([str(BIN), *cmd], capture_output=True, text=True, env=env, timeout=60, input="")
        assert p.returncode == 2, (cmd, p.returncode, p.stderr)
        for part in ("OMNISHARD_LOGITS_ROWS: expected a positive number of rows (a test hook), got 'many'",
                     "OMNISHARD_LOG_SAMPLES: expected 1", "got 'yes'", "OMNISHARD_FAULT: expected RANK:STEP",
                     "OMNISHARD_TOK_RANGES: expected 1"):
            assert part in p.stderr, (cmd, p.stderr)
        assert "none.json" not in p.stderr and p.stdout == "", p.stdout + p.stderr


def test_the_run_lists_the_variables_set(tmp_path_factory):
    d = tiny_slam(tmp_path_factory, "knobs", 2)
    p = run(["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / "o", "--max_steps", 1],
            env={"OMNISHARD_LOG_SAMPLES": "1", "OMNISHARD_LOGITS_ROWS": "4"}, timeout=120)
    assert "environment settings:" in p.stderr and "OMNISHARD_LOG_SAMPLES=1" in p.stderr and \
        "OMNISHARD_LOGITS_ROWS=4" in p.stderr, p.stderr
    env = json.load(open(d / "o" / "args.json"))["resolved"]["environment"]
    assert env["OMNISHARD_LOG_SAMPLES"] == "1" and env["OMNISHARD_LOGITS_ROWS"] == "4", env
