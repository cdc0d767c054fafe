"""logging.jsonl's per-phase times (time/*_s, docs/training.md): present on every step line, non-negative, within
the step's time, and zero where the set-up has no such phase; the slowest rank's compute between the mean and the
step."""
import pytest

from omni_run import tiny_slam, sft, logs

PHASES = ["time/data_s", "time/compute_s", "time/gather_wait_s", "time/reduce_wait_s", "time/optimizer_s"]
CPU = "time/cpu_s"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return tiny_slam(tmp_path_factory, "phases", 8)


@pytest.mark.parametrize("np_,stage", [(None, 0), (2, 3), (2, 1)])
def test_phase_times_add_up_to_at_most_the_step(small, tmp_path, np_, stage):
    out = tmp_path / "out"
    sft(small / "model", small / "data.jsonl", out, 3, ["--zero_stage", stage, "--save_steps", "0", "--max_length", "64"],
        np_=np_)
    lines = logs(out)
    assert [x["step"] for x in lines] == [1, 2, 3]
    for x in lines:
        t = [x[k] for k in PHASES]
        assert all(v >= 0 for v in t), x
        assert x["time/compute_s"] > 0 and x[CPU] > 0, x
        # the slowest rank's compute: at least the mean, equal to it on one rank (to the microsecond it is kept in)
        assert x["time/compute_s"] - 1e-6 <= x["time/compute_max_s"] <= x["step_time_s"] + 1e-3, x
        if np_ is None:
            assert abs(x["time/compute_max_s"] - x["time/compute_s"]) <= 1e-6, x
        # the phases are disjoint parts of the step (mean over ranks; the step time is rank 0's)
        assert sum(t) <= 1.5 * x["step_time_s"] + 1e-3, x
        if np_ is None:   # one rank at stage 0: no all-gather, nothing to reduce (a clock reading or two)
            assert x["time/gather_wait_s"] < 1e-3 and x["time/reduce_wait_s"] < 1e-3, x
        else:
            assert x["time/reduce_wait_s"] > 0 and x["time/gather_wait_s"] > 0, x
