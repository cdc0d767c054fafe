"""Never hang (issue 9): a rank stopped with SIGSTOP mid-run ends the whole job within --ddp_timeout + 10 s, and every
live rank names the stopped one (docs/operations.md, "Timeouts and stuck ranks")."""
import os, re, signal, subprocess, time, uuid
import pytest

from oracle import slam_omni_ref as ref
from omni_run import MPIRUN
from conftest import BIN

TIMEOUT = 3


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("wd")
    ref.make_model(str(d / "model"), hidden=16, layers=1, heads=2, kv_heads=1, inter=24, T=192, A=80, G=3, seed=3)
    ref.make_data(str(d / "data.jsonl"), 12, G=3, T=192, A=80, seed=5)
    return d


def tagged_pids(tag, ranks_only=True):
    """The processes started with OMNISHARD_TEST_TAG=tag in their environment: {rank: pid} of the ranks, or with
    ranks_only=False {pid: command} of all of them (mpirun, Open MPI daemons, launchers, ranks)."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            env = open(f"/proc/{p}/environ", "rb").read().split(b"\0")
            comm = open(f"/proc/{p}/comm").read().strip()
        except OSError:
            continue
        if f"OMNISHARD_TEST_TAG={tag}".encode() not in env:
            continue
        rank = [e for e in env if e.startswith(b"OMPI_COMM_WORLD_RANK=")]
        if not ranks_only:
            out[int(p)] = comm
        elif rank:
            out[int(rank[0].split(b"=")[1])] = int(p)
    return out


def cleanup(tag, ranks_only=True):
    """SIGCONT and SIGKILL whatever is left, so a failing test leaves no stopped processes behind."""
    left = tagged_pids(tag, ranks_only)
    for pid in (left.values() if ranks_only else left):
        for s in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, s)
            except ProcessLookupError:
                pass


def launch(cmd, tag, out):
    env = dict(os.environ, OMP_NUM_THREADS="1", OMNISHARD_TEST_TAG=tag)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for_steps(out, n, proc, limit=60):
    t = time.time()
    while time.time() - t < limit:
        log = out / "logging.jsonl"
        if log.exists() and len(log.read_text().splitlines()) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the run did not reach step %d" % n)


def sft_cmd(d, out, extra=()):
    return [str(BIN), "sft", "--model", str(d / "model"), "--dataset", str(d / "data.jsonl"), "--output_dir", str(out),
            "--max_steps", "100000", "--save_steps", "0", "--max_length", "32", "--ddp_timeout", str(TIMEOUT), *extra]


def test_stopped_rank_ends_the_job_and_is_named(tiny, tmp_path):
    tag, out = uuid.uuid4().hex, tmp_path / "o"
    p = launch([*MPIRUN, "-np", "3", *sft_cmd(tiny, out, ["--deepspeed", "zero3"])], tag, out)
    try:
        wait_for_steps(out, 3, p)
        victim = tagged_pids(tag)[1]
        os.kill(victim, signal.SIGSTOP)
        t = time.time()
        try:
            _, err = p.communicate(timeout=TIMEOUT + 10)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"mpirun still running {TIMEOUT + 10} s after SIGSTOP of rank 1")
        left = tagged_pids(tag, ranks_only=False)
        assert not left, f"processes left {time.time() - t:.1f} s after SIGSTOP: {left}"
    finally:
        cleanup(tag, ranks_only=False)
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode != 0
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
