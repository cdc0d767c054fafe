"""ZeRO stages 0-3 on N ranks x batch 1 == 1 rank x gradient accumulation N (design invariant 3)."""
import os
import numpy as np
import pytest

from oracle import slam_omni_ref as ref
from omni_run import sft, logs, weights, rel

STEPS = 5


@pytest.fixture(scope="module", params=["tied", "untied"])
def setup(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    # hidden 24 / inter 40 / 3 layers: bucket sizes are not multiples of 2, 3 or 4
    ref.make_model(str(d / "model"), hidden=24, layers=3, heads=4, kv_heads=2, inter=40, T=193, A=81, G=3,
                   tied=request.param == "tied", seed=3)
    ref.make_data(str(d / "data.jsonl"), 13, G=3, T=193, A=81, seed=5)
    return d


COMMON = ["--learning_rate", "2e-3", "--lr_scheduler_type", "cosine", "--warmup_steps", "1", "--weight_decay", "0.01",
          "--max_length", "64", "--save_steps", "0"]


def reference(d, n):
    out = d / f"ref{n}"
    if not (out / "final_model").exists():
        sft(d / "model", d / "data.jsonl", out, STEPS, [*COMMON, "--gradient_accumulation_steps", n])
    return out


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_n_ranks_equal_accumulation(setup, n, stage):
    d = setup
    r = reference(d, n)
    out = d / f"n{n}s{stage}"
    sft(d / "model", d / "data.jsonl", out, STEPS, [*COMMON, "--zero_stage", stage], np_=n)
    a, b = logs(out), logs(r)
    assert [x["step"] for x in a] == list(range(1, STEPS + 1))
    # the ranks' samples differ, so the head moved rows between them (docs/training.md): the invariant covers it
    assert sum(x["head_rows_moved"] for x in a) > 0, [x["head_rows_moved"] for x in a]
    for x, y in zip(a, b):
        assert abs(x["loss"] - y["loss"]) <= 1e-6 * abs(y["loss"]), (x, y)
    wa, wb = weights(out / "final_model"), weights(r / "final_model")
    assert set(wa) == set(wb)
    for k in wb:
        assert rel(wa[k], wb[k]) <= 1e-5, (k, rel(wa[k], wb[k]))


@pytest.mark.parametrize("stage", [2, 3])
def test_n_ranks_with_accumulation(setup, stage):
    """2 ranks x accumulation 2 == 1 rank x accumulation 4: a micro-batch's gradient reduce-scatter still in flight
    while the next micro-batch runs (the tied vocabulary bucket's, until the head opens it again) is added into the
    slice in micro-batch order (docs/zero.md, "Overlap")."""
    d = setup
    r = reference(d, 4)
    out = d / f"n2a2s{stage}"
    sft(d / "model", d / "data.jsonl", out, STEPS, [*COMMON, "--zero_stage", stage, "--gradient_accumulation_steps", 2],
        np_=2)
    a, b = logs(out), logs(r)
    assert [x["step"] for x in a] == list(range(1, STEPS + 1))
    for x, y in zip(a, b):
        assert abs(x["loss"] - y["loss"]) <= 1e-6 * abs(y["loss"]), (x, y)
        assert abs(x["grad_norm"] - y["grad_norm"]) <= 1e-5 * abs(y["grad_norm"]), (x, y)
    wa, wb = weights(out / "final_model"), weights(r / "final_model")
    for k in wb:
        assert rel(wa[k], wb[k]) <= 1e-5, (k, rel(wa[k], wb[k]))
