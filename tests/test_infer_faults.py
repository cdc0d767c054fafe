"""omnishard infer --output_file under faults, at 1 and 3 ranks (docs/inference.md "Stopping and faults"): kill -9
mid-run, SIGTERM, a stopped rank with --ddp_timeout, a full disk. Every run ends in bounded time with a message, the
file keeps only complete lines, and --resume true then gives exactly the lines of an undisturbed run."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BIN
from fault_run import cleanup, gone_within, start_tagged, tagged_pids
from oracle import slam_samples_ref as sref
from omni_run import MPIRUN, run
from test_infer import A, make

N, NEW = 30, 40
# rounds of 2 records per rank (the round is what a signal lets finish): many rounds, each short
ARGS = ["--max_new_tokens", str(NEW), "--speech_batch_size", "2"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    make(d, 3, False, None)   # no forced stops: every record runs its max_new_tokens steps
    data = tmp_path_factory.mktemp("data") / "test.jsonl"
    sref.write_jsonl(data, sref.make_records(N, A=A, seed=11))
    full = tmp_path_factory.mktemp("full") / "full.jsonl"
    run(["infer", "--model", d, "--dataset", data, "--output_file", full, *ARGS], timeout=300)
    return d, data, untimed(full)


def untimed(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [{k: v for k, v in json.loads(s).items() if k != "seconds"} for s in text.splitlines()]


def cmd(d, data, out, np_, *extra):
    c = [str(BIN), "infer", "--model", str(d), "--dataset", str(data), "--output_file", str(out), *ARGS, *extra]
    return [*MPIRUN, "-np", str(np_), *c] if np_ > 1 else c


def complete(out):
    """the complete lines of out (each parsed) and whether a partial last line follows them"""
    text = open(out, encoding="utf-8").read() if os.path.exists(out) else ""
    whole = text[: text.rfind("\n") + 1]
    return [json.loads(s) for s in whole.splitlines()], len(whole) != len(text)


def started(p, out, limit=120):
    """wait until out has a complete line (the run is past its first round)"""
    t = time.time()
    while time.time() - t < limit:
        if complete(out)[0]:
            return
        assert p.poll() is None, p.communicate()
        time.sleep(0.01)
    raise AssertionError("no line was written")


def resume_and_check(setup, out, np_):
    d, data, want = setup
    p = run(["infer", "--model", d, "--dataset", data, "--output_file", out, *ARGS, "--resume", "true"],
            np_=np_ if np_ > 1 else None, timeout=300)
    assert untimed(out) == want
    return p


def rank_pids(p, tag, np_):
    if np_ == 1:
        return {0: p.pid}
    t = time.time()
    while time.time() - t < 30:
        ranks = tagged_pids(tag)
        if len(ranks) == np_:
            return ranks
        time.sleep(0.05)
    raise AssertionError(f"ranks not found: {tagged_pids(tag)}")


def faulted(c, out, np_, inject, bound, what, grace=0):
    """start c, call inject({rank: pid}) once out has a line, require every process gone in time: (exit code, stderr)"""
    p, tag = start_tagged(c)
    try:
        started(p, out)
        inject(rank_pids(p, tag, np_))
        return gone_within(p, tag, bound, what, grace)
    finally:
        cleanup(tag, ranks_only=False)


def signal_all(ranks, sig):
    for pid in ranks.values():
        os.kill(pid, sig)


@pytest.mark.parametrize("np_", [1, 3])
def test_kill_9_mid_run_then_resume(setup, tmp_path, np_):
    d, data, want = setup
    out = tmp_path / "out.jsonl"
    rc, _ = faulted(cmd(d, data, out, np_), out, np_, lambda r: os.kill(r[0], signal.SIGKILL), 30, "kill -9 of rank 0")
    assert rc != 0
    got, _ = complete(out)
    assert 0 < len(got) < N and [r["index"] for r in got] == list(range(len(got)))
    resume_and_check(setup, out, np_)


@pytest.mark.parametrize("np_", [1, 3])
def test_sigterm_finishes_the_round_and_says_how_many_records(setup, tmp_path, np_):
    d, data, want = setup
    out = tmp_path / "out.jsonl"
    # as kill or a scheduler does: every rank
    rc, err = faulted(cmd(d, data, out, np_), out, np_, lambda r: signal_all(r, signal.SIGTERM), 60, "SIGTERM")
    assert rc == (143 if np_ == 1 else rc) and rc != 0, (rc, err)
    assert "SIGTERM received: the records being decoded are finished and written" in err, err
    m = re.search(r"stopped by a signal: the first (\d+) of 30 records are in (\S+); run again with --resume true", err)
    assert m and m.group(2) == str(out), err
    got, partial = complete(out)
    assert len(got) == int(m.group(1)) < N and not partial   # the finished round's lines, whole
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in got] == want[: len(got)]
    resume_and_check(setup, out, np_)


def test_stopped_rank_with_ddp_timeout_names_the_round(setup, tmp_path):
    """SIGSTOP of rank 1 at 3 ranks (ZeRO-3, the ranks in lockstep): every rank ends within --ddp_timeout + 15 s,
    the report names the records being decoded and how many are in the file. (At 1 rank a stopped process waits on
    nobody: there is no collective to time out.)"""
    d, data, want = setup
    out = tmp_path / "out.jsonl"
    rc, err = faulted(cmd(d, data, out, 3, "--ddp_timeout", "4"), out, 3, lambda r: os.kill(r[1], signal.SIGSTOP),
                      4 + 15, "SIGSTOP of rank 1", grace=10)
    assert rc != 0
    reports = [l for l in err.splitlines() if "collective watchdog" in l]
    assert reports, err
    for l in reports:
        m = re.search(r"while decoding records (\d+)-\d+ of 30 \(omnishard infer: the first (\d+) are in the output "
                      r"file; --resume true continues\)", l)
        assert m and m.group(1) == m.group(2), l
        assert "rank 1 (no answer" in l, l
        assert "during start-up" not in l, l
    got, _ = complete(out)
    assert [r["index"] for r in got] == list(range(len(got))) and len(got) < N
    resume_and_check(setup, out, 3)


@pytest.mark.parametrize("np_", [1, 3])
def test_full_disk_keeps_complete_lines_then_resumes(setup, tmp_path, np_):
    if os.geteuid() != 0:
        pytest.skip("the full-disk case needs root: it mounts a size-limited tmpfs and fills it")
    d, data, want = setup
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    line = max(len(json.dumps(r)) for r in want)
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={4 * 4096 + 8 * line}", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if m.returncode != 0:
        pytest.skip(f"this machine does not let the tests mount a tmpfs (a container without mount rights?): {m.stderr.strip()}")
    try:
        out = mnt / "out.jsonl"
        p = subprocess.run(cmd(d, data, out, np_), capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        assert p.returncode == 1 or (np_ > 1 and p.returncode != 0), p.stderr
        m = re.search(r"write failed: No space left on device; the file holds its first (\d+) records' complete lines",
                      p.stderr)
        assert m and f"--output_file {out}" in p.stderr, p.stderr
        got, partial = complete(out)
        assert len(got) == int(m.group(1)) and 0 < len(got) < N and not partial
        moved = tmp_path / "out.jsonl"   # space again: the same file elsewhere, with its settings file
        shutil.copy(out, moved)
        shutil.copy(f"{out}.run.json", f"{moved}.run.json")
    finally:
        if subprocess.run(["umount", str(mnt)]).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)])
    resume_and_check(setup, moved, np_)
