"""The head's rows moved between ranks (src/train/head_balance.h, docs/training.md "Balancing the head across
ranks"). Samples whose answers differ in how much is text and how much audio give the ranks different head work;
rows then move, and the run must be the same run as with --head_balance false, where they stay: the moved rows'
losses, weight gradients and input gradients are the same sums, in another order. Invariant tests only; the
N ranks == 1 rank tests (test_zero_equivalence.py, test_bf16.py) compare the moving runs with accumulation too."""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import BIN
from oracle import slam_omni_ref as ref
from safetensors.numpy import load_file

from omni_run import MPIRUN, logs, weights, rel
from omni_run import run as run_bin

STEPS = 3
G, T, A = 3, 192, 80
ARGS = ["--learning_rate", "1e-3", "--per_device_train_batch_size", "2", "--max_length", "160", "--save_steps", "0",
        "--dump_grads"]


def write_data(path, n, seed=4):
    """SLAM-Omni-like answers: a prompt without targets, then text and audio targets together, then audio only (the
    text has ended) or, in every fourth sample, text only; lengths 12-150, so the ranks' rows and classes differ"""
    g = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(n):
            L = int(g.integers(12, 151))
            p = int(g.integers(1, L // 3 + 1))
            te = int(g.integers(p + 1, L + 1))   # text targets [p, te)
            ae = L if i % 4 else int(g.integers(p, te + 1))   # audio targets [p, ae)
            ids, labels = [], []
            for r in range(G + 1):
                audio = r < G
                ids.append([int(x + (T if audio else 0)) for x in g.integers(0, A if audio else T, size=L)])
                lab = [int(x) for x in g.integers(0, A if audio else T, size=L)]
                end = ae if audio else te
                labels.append([lab[k] if p <= k < end else -100 for k in range(L)])
            f.write(json.dumps({"input_ids": ids, "labels": labels}) + "\n")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("head_balance")
    ref.make_model(str(d / "model"), hidden=32, layers=2, heads=4, kv_heads=2, inter=48, T=T, A=A, G=G, tied=True)
    write_data(d / "data.jsonl", 4 * 2 * STEPS)
    write_data(d / "val.jsonl", 7, seed=9)
    return d


def run(d, name, np_, balance, extra=(), rows="16"):
    """balance "1": the rows move (--head_balance true), "0": they stay (--head_balance false)"""
    out = d / name
    grads = d / f"{name}.grads"
    env = {}
    if rows:
        env["OMNISHARD_LOGITS_ROWS"] = rows   # many chunks, some across owners
    run_bin(["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", out, "--max_steps", STEPS,
             *ARGS, grads, "--head_balance", {"1": "true", "0": "false"}[balance], *extra], np_=np_, env=env)
    return logs(out), load_file(str(grads)), weights(out / "final_model")


HEAD_PARAMS = ("embed_tokens", "lm_head", "group_decode_adapter")   # the parameters whose gradients the head sums


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_moved_rows_same_run(setup, np_, dtype):
    """rows move (head_rows_moved > 0 in logging.jsonl; 0 when told to stay), and losses, step-1 gradients and the
    final weights match the run where they stay. A row's bits do not depend on the rows beside it (docs/design.md,
    of that name): the moved rows' dh are the same bits, so every gradient below the head is identical; only the
    head's own weight gradients sum the rows in other groups (fp32 order). bf16 runs at learning rate 0: after an
    update those last-bit differences in the head's weights become bf16 ulps wherever the next step rounds a value
    they touch (a chance event, not a bound), while with the weights unchanged each of the steps, whose rows move
    differently, must give the same numbers"""
    extra = ["--zero_stage", 3, "--torch_dtype", dtype] + (["--learning_rate", 0] if dtype == "bfloat16" else [])
    moved = run(setup, f"on{np_}{dtype}", np_, "1", extra)
    stay = run(setup, f"off{np_}{dtype}", np_, "0", extra)
    assert sum(x["head_rows_moved"] for x in moved[0]) > 0, [x["head_rows_moved"] for x in moved[0]]
    assert all(x["head_rows_moved"] == 0 for x in stay[0])
    assert len(moved[0]) == len(stay[0]) == STEPS
    for x, y in zip(moved[0], stay[0]):
        for k in ("loss", "text_loss", "audio_loss_0", "audio_loss_2", "text_acc", "audio_acc_1", "grad_norm"):
            assert abs(x[k] - y[k]) <= 1e-6 * max(abs(y[k]), 1e-6), (k, x, y)
    for k in stay[1]:
        assert rel(moved[1][k], stay[1][k]) <= 1e-6, (k, rel(moved[1][k], stay[1][k]))
    below = [k for k in stay[1] if not any(h in k for h in HEAD_PARAMS)]
    assert len(below) > 10, sorted(stay[1])
    for k in below:
        same = np.array_equal(moved[1][k].view(np.uint32), stay[1][k].view(np.uint32))
        assert same, (k, int((moved[1][k] != stay[1][k]).sum()), "elements differ", rel(moved[1][k], stay[1][k]))
    for k in stay[2]:
        assert rel(moved[2][k], stay[2][k]) <= 1e-6, (k, rel(moved[2][k], stay[2][k]))


@pytest.mark.parametrize("case,flags", [
    # lm_head (the tied embedding) trained on the audio rows only: dW over [row0, V), the text class none
    ("audio_rows", ["--freeze_llm", "true", "--trainable_embed_rows", "audio"]),
    # LoRA: lm_head and the adapter frozen; the moved rows still return dh for the layers below
    ("lora", ["--train_type", "lora", "--lora_rank", 4]),
    # the adapter frozen and stage 0: the moved rows' lm_head gradient summed by the all-reduce
    ("adapter_frozen_stage0", ["--freeze_group_decode_adapter", "true", "--zero_stage", 0]),
])
def test_moved_rows_with_frozen_parts(setup, case, flags):
    """2 ranks, fp32: the moved rows' weight gradients exist only for what trains, their dh always"""
    moved = run(setup, f"on_{case}", 2, "1", flags)
    stay = run(setup, f"off_{case}", 2, "0", flags)
    assert sum(x["head_rows_moved"] for x in moved[0]) > 0
    for x, y in zip(moved[0], stay[0]):
        assert abs(x["loss"] - y["loss"]) <= 1e-6 * abs(y["loss"]) and abs(x["grad_norm"] - y["grad_norm"]) <= \
            1e-6 * abs(y["grad_norm"]), (x, y)
    assert set(moved[2]) == set(stay[2])
    for k in stay[2]:
        assert rel(moved[2][k], stay[2][k]) <= 1e-6, (k, rel(moved[2][k], stay[2][k]))


def test_evaluation_and_empty_micro_batches(setup):
    """3 ranks, 7 evaluation samples in micro-batches of 2: the second round gives one rank a sample and two an empty
    micro-batch (2 rows, room for no moved rows); training micro-batches of 1, so the ranks' rows differ more; the
    logits chunk at its natural size (no OMNISHARD_LOGITS_ROWS). The evaluation's losses (forward only: the answers
    carry loss sums, no dh) and the training match the run whose rows stay."""
    extra = ["--zero_stage", 2, "--per_device_train_batch_size", 1, "--val_dataset", setup / "val.jsonl",
             "--eval_steps", 2]
    moved = run(setup, "eval_on", 3, "1", extra, rows=None)
    stay = run(setup, "eval_off", 3, "0", extra, rows=None)
    assert sum(x.get("head_rows_moved", 0) for x in moved[0]) > 0
    ev = lambda log: [x for x in log if "eval_loss" in x]
    assert len(ev(moved[0])) == len(ev(stay[0])) == 2   # at step 2 and at the end
    assert all(x["eval_samples"] == 7 for x in ev(moved[0]))
    for x, y in zip(ev(moved[0]), ev(stay[0])):
        for k in ("eval_loss", "eval_text_loss", "eval_audio_loss_1", "eval_text_acc", "eval_audio_acc_2"):
            assert abs(x[k] - y[k]) <= 1e-6 * max(abs(y[k]), 1e-6), (k, x[k], y[k])
    for k in stay[2]:
        assert rel(moved[2][k], stay[2][k]) <= 1e-6, (k, rel(moved[2][k], stay[2][k]))


def test_the_variable_is_retired(setup):
    """OMNISHARD_HEAD_BALANCE set, to any value, stops every rank naming the option that replaced it"""
    p = run_bin(["sft", "--model", setup / "model", "--dataset", setup / "data.jsonl", "--output_dir", setup / "bad",
                 "--max_steps", 1, "--max_length", "160"], np_=2, check=False, env={"OMNISHARD_HEAD_BALANCE": "0"})
    assert p.returncode != 0
    assert "OMNISHARD_HEAD_BALANCE: no longer read (got '0'): it is the option --head_balance" in p.stderr, p.stderr
    assert not (setup / "bad").exists()


def test_ranks_must_agree(setup):
    """rank 1 told to keep its rows, rank 0 not: the start-up agreement stops both, each naming the option, the
    values and the ranks (src/train/agree.c)"""
    args = [str(BIN), "sft", "--model", str(setup / "model"), "--dataset", str(setup / "data.jsonl"), "--output_dir",
            str(setup / "mixed"), "--max_steps", "1", "--max_length", "160"]
    cmd = [*MPIRUN, "-np", "1", *args, ":", "-np", "1", *args, "--head_balance", "false"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode != 0
    for r in (0, 1):
        assert f"omnishard: rank {r}: ranks disagree on --head_balance: rank 0 has '(not given)', rank 1 has " \
            "'false'" in p.stderr, p.stderr


@pytest.mark.parametrize("case,extra,env,want", [
    ("default", [], {}, None),
    ("guard", ["--device", "guard"], {}, True),
    ("off", ["--head_balance", "false"], {}, False),
    ("on", ["--head_balance", "true"], {}, True)])
def test_setting_as_the_run_takes_it(setup, tmp_path, case, extra, env, want):
    """--head_balance not given: true where the backend's memory is the host's (the CPU), false on a device
    (OMNISHARD_TEST_DEVICE=cuda runs this on the GPU); the guard backend keeps the CPU's (a run on it computes the
    CPU's numbers); given, it is honoured. args.json records what the run took."""
    from omni_run import DEVICE
    if want is None:
        want = not (DEVICE or "cpu").startswith("cuda")
    if case == "guard" and DEVICE and DEVICE != "cpu":
        pytest.skip("the guard backend's case runs on the CPU, and OMNISHARD_TEST_DEVICE points these tests at a device")
    run_bin(["sft", "--model", setup / "model", "--dataset", setup / "data.jsonl", "--output_dir", tmp_path / "o",
             "--max_steps", 1, "--max_length", "160", "--save_steps", "0", *extra], env=env)
    assert json.load(open(tmp_path / "o" / "args.json"))["head_balance"] is want
