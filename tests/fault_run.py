"""Fault injection from outside a running job (tests of the collective watchdog): find the job's processes by a tag
in their environment, inject a fault mid-run, require every process gone within a bound, clean up either way."""
import os, signal, subprocess, time, uuid


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


def wait_for_steps(out, n, proc, limit=60):
    t = time.time()
    while time.time() - t < limit:
        log = out / "logging.jsonl"
        if log.exists() and len(log.read_text().splitlines()) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the run did not reach step %d" % n)


def start_tagged(cmd, env=None):
    """Popen cmd with a fresh OMNISHARD_TEST_TAG (and env) in its environment: (process, tag)."""
    tag = uuid.uuid4().hex
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1", OMNISHARD_TEST_TAG=tag, **(env or {})))
    return p, tag


def gone_within(p, tag, bound, what, grace=0):
    """Require mpirun p and every process it started gone within bound seconds from now (the processes within grace
    seconds more after mpirun: a stopped rank the launcher killed may be reaped a moment later on a loaded machine);
    SIGCONT + SIGKILL whatever is left either way. Returns (mpirun's exit code, its stderr)."""
    t = time.time()
    try:
        try:
            _, err = p.communicate(timeout=bound)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"mpirun still running {bound} s after {what}")
        while tagged_pids(tag, ranks_only=False) and time.time() - t < bound + grace:
            time.sleep(0.1)
        left = tagged_pids(tag, ranks_only=False)
        assert not left, f"processes left {time.time() - t:.1f} s after {what}: {left}"
    finally:
        cleanup(tag, ranks_only=False)
        if p.poll() is None:
            p.kill()
            p.communicate()
    return p.returncode, err


def run_with_fault(cmd, out, fault, bound, what):
    """Start cmd (an sft run logging to out), call fault(tag) after its third step, then require that mpirun and
    every process it started are gone within bound seconds. SIGCONT + SIGKILL whatever is left either way.
    Returns (mpirun's exit code, its stderr)."""
    p, tag = start_tagged(cmd)
    try:
        wait_for_steps(out, 3, p)
        fault(tag)
    except BaseException:
        cleanup(tag, ranks_only=False)
        p.kill()
        p.communicate()
        raise
    return gone_within(p, tag, bound, what)
