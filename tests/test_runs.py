"""Run directories and their logs (issue 27): the ETA of a resumed run counts only its own steps."""
import json, re
import pytest

from oracle import slam_omni_ref as ref
from omni_run import run


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    ref.make_model(str(d / "model"), hidden=16, layers=1, heads=2, kv_heads=1, inter=32, T=128, A=64, G=3, seed=2)
    ref.make_data(str(d / "data.jsonl"), 6, G=3, T=128, A=64, seed=3)
    return d


def sft(d, out, *extra, check=True, data="data.jsonl"):
    return run(["sft", "--model", d / "model", "--dataset", d / data, "--output_dir", out, "--max_length", 64,
                *extra], check=check)


def lines(out):
    return [json.loads(l) for l in open(out / "logging.jsonl")]


def test_eta_after_resume_counts_this_runs_steps(tiny, tmp_path):
    """remaining = elapsed / (steps this run) * (steps left): the invariant of a constant pace; before the fix the
    resumed run divided by the absolute step (step 3 of a run resumed at 2: 1/3 of the estimate)"""
    out = tmp_path / "o"
    sft(tiny, out, "--max_steps", 2, "--save_steps", 2)
    p = sft(tiny, out, "--max_steps", 6, "--resume_from_checkpoint", out / "checkpoint-2")
    after = [l for l in lines(out) if l["step"] > 2]
    assert [l["step"] for l in after] == [3, 4, 5, 6]
    for l in after:
        want = l["time/elapsed_s"] / (l["step"] - 2) * (6 - l["step"])
        assert l["time/remaining_s"] == pytest.approx(want, rel=1e-6, abs=1e-9), l
    etas = re.findall(r"step (\d+)/6 .* ETA (\S+(?: \S+)*)$", p.stderr, re.M)
    assert [s for s, _ in etas] == ["3", "4", "5", "6"] and etas[-1][1] == "0s", p.stderr
    assert all(re.fullmatch(r"(\d+d )?(\d+h )?(\d+m )?\d+s", e) for _, e in etas), etas
