"""Never hang (issue 9): a rank stopped with SIGSTOP mid-run ends the whole job within --ddp_timeout + 10 s, and every
live rank names the stopped one (docs/operations.md, "Timeouts and stuck ranks")."""
import os, re, subprocess, signal
import pytest

from oracle import slam_omni_ref as ref
from omni_run import MPIRUN
from conftest import BIN
from fault_run import run_with_fault, tagged_pids

TIMEOUT = 3


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("wd")
    ref.make_model(str(d / "model"), hidden=16, layers=1, heads=2, kv_heads=1, inter=24, T=192, A=80, G=3, seed=3)
    ref.make_data(str(d / "data.jsonl"), 12, G=3, T=192, A=80, seed=5)
    return d


def sft_cmd(d, out, extra=()):
    return [str(BIN), "sft", "--model", str(d / "model"), "--dataset", str(d / "data.jsonl"), "--output_dir", str(out),
            "--max_steps", "100000", "--save_steps", "0", "--max_length", "32", "--ddp_timeout", str(TIMEOUT), *extra]


def test_stopped_rank_ends_the_job_and_is_named(tiny, tmp_path):
    out = tmp_path / "o"
    rc, err = run_with_fault([*MPIRUN, "-np", "3", *sft_cmd(tiny, out, ["--deepspeed", "zero3"])], out,
                             lambda tag: os.kill(tagged_pids(tag)[1], signal.SIGSTOP), TIMEOUT + 10, "SIGSTOP of rank 1")
    assert rc != 0
    reports = [l for l in err.splitlines() if "collective watchdog" in l]
    by_rank = {int(re.match(r"omnishard: rank (\d+):", l).group(1)): l for l in reports}
    assert set(by_rank) == {0, 2}, err   # every live rank reports; the stopped one cannot
    for l in by_rank.values():
        missing = re.search(r"did not arrive at [^:]*: (.*?); ranks waiting", l).group(1)
        assert missing == "rank 1 (no answer: stopped, dead or cut off)", l
        assert re.search(r"at step \d+", l), l


def test_deadline_is_an_option_that_must_agree(tiny, tmp_path):
    """--ddp_timeout is checked at parse time and is part of the start-up agreement."""
    p = subprocess.run([str(BIN), *sft_cmd(tiny, tmp_path / "a", ["--ddp_timeout", "-1"])[1:]], capture_output=True, text=True)
    assert p.returncode != 0 and "--ddp_timeout" in p.stderr
    base = sft_cmd(tiny, tmp_path / "b")
    base[base.index("--max_steps") + 1] = "1"
    cmd = [*MPIRUN, "-np", "1", *base, ":", "-np", "1", *base, "--ddp_timeout", "30"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode != 0 and "--ddp_timeout" in p.stderr and "rank 1" in p.stderr, p.stderr
