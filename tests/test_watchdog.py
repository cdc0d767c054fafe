"""Never hang (issue 9): a rank stopped with SIGSTOP mid-run ends the whole job within --ddp_timeout + 10 s, and every
live rank names the stopped one; a rank that never reaches MPI_Init or MPI_Finalize ends the others there within the
same bound, naming the call (docs/operations.md, "Timeouts and stuck ranks")."""
import os, re, subprocess, signal, time
import pytest

from oracle import slam_omni_ref as ref
from omni_run import MPIRUN
from conftest import BIN
from fault_run import cleanup, gone_within, run_with_fault, start_tagged, tagged_pids, wait_for_steps

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
    # Every live rank reports. The stopped rank cannot while stopped, but Open MPI's kill sequence sends SIGCONT
    # before SIGTERM, so rank 1 may wake, arrive, and report the peers' timeout in the moment before SIGTERM lands;
    # such a line must say it learned of the timeout from a peer, never blame a rank itself.
    assert {0, 2} <= set(by_rank) <= {0, 1, 2}, err
    late = by_rank.pop(1, None)
    assert late is None or re.search(r"rank [02] reported that its wait passed --ddp_timeout", late), late
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


def test_rank_that_never_starts_ends_the_others_in_mpi_init(tiny, tmp_path):
    """Rank 1 is launched through a shell that sleeps far past the deadline before it starts omnishard: rank 0 waits
    in MPI_Init (Open MPI's start-up fence) and must end by --ddp_timeout, naming the call."""
    cmd = sft_cmd(tiny, tmp_path / "o", ["--max_steps", "1"])
    late = ["sh", "-c", 'sleep 120; exec "$0" "$@"', *cmd]
    p, tag = start_tagged([*MPIRUN, "-np", "1", *cmd, ":", "-np", "1", *late])
    rc, err = gone_within(p, tag, TIMEOUT + 10, "the start of a job whose rank 1 never starts")
    assert rc != 0
    assert re.search(rf"omnishard: rank 0: MPI_Init did not complete within {TIMEOUT} s \(--ddp_timeout\): a rank of "
                     r"the job did not start or did not reach it", err), err
    assert not (tmp_path / "o").exists()


def test_rank_stalled_before_finalize_ends_the_others_in_mpi_finalize(tiny, tmp_path):
    """Rank 1 stalls after its last step (OMNISHARD_FAULT=1:3:stall, step 3 = after the 2 steps, before
    MPI_Finalize): rank 0, done, waits in MPI_Finalize (Open MPI's shut-down fence) and must end by --ddp_timeout,
    naming the call, with a non-zero status; the run's outputs are complete."""
    out = tmp_path / "o"
    cmd = sft_cmd(tiny, out, ["--max_steps", "2"])
    p, tag = start_tagged([*MPIRUN, "-np", "2", *cmd], env={"OMNISHARD_FAULT": "1:3:stall"})
    t = time.time()
    while not (out / "final_model" / "model.safetensors").exists() and p.poll() is None and time.time() - t < 120:
        time.sleep(0.05)
    rc, err = gone_within(p, tag, TIMEOUT + 10, "rank 0's final model, rank 1 stalled before MPI_Finalize")
    assert rc != 0
    m = re.search(rf"omnishard: rank 0: MPI_Finalize did not complete within {TIMEOUT} s \(--ddp_timeout\): another "
                  r"rank of the job did not reach it", err)
    assert m and "omnishard sft: done" in err[:m.start()], err
    assert (out / "final_model" / "model.safetensors").exists()


def test_a_killed_rank_ends_the_others_at_once(tiny, tmp_path):
    """issue 24: kill -9 of one rank: the survivors, waiting in a collective the dead rank never joins, notice within
    about a second that it died (its process is gone from the host), say so and end, instead of waiting for
    mpirun's SIGKILL (30 s later with the recommended odls_base_sigkill_timeout 30) or the deadline (600 s here).
    mpirun itself stops forwarding the ranks' output once a rank has died and waits out its own SIGKILL timeout, so
    each rank's stderr goes to a file of its own."""
    out = tmp_path / "o"
    cmd = [*MPIRUN, "--mca", "odls_base_sigkill_timeout", "30", "-np", "3", "sh", "-c",
           f'exec "$0" "$@" 2>{tmp_path}/rank.$OMPI_COMM_WORLD_RANK',
           *sft_cmd(tiny, out, ["--deepspeed", "zero3", "--ddp_timeout", "600"])]
    p, tag = start_tagged(cmd)
    try:
        wait_for_steps(out, 3, p)
        os.kill(tagged_pids(tag)[1], signal.SIGKILL)
        t0 = time.time()
        while tagged_pids(tag) and time.time() - t0 < 8:
            time.sleep(0.1)
        assert not tagged_pids(tag), f"ranks still running 8 s after kill -9 of rank 1: {tagged_pids(tag)}"
    finally:
        cleanup(tag, ranks_only=False)
        p.kill()
        p.communicate()
    for r in (0, 2):
        err = (tmp_path / f"rank.{r}").read_text()
        line = [l for l in err.splitlines() if l.startswith(f"omnishard: rank {r}: ") and "ended while this rank waits in" in l]
        assert line and "rank 1 (pid " in line[0] and "the job cannot continue; ending now" in line[0], err
        assert re.search(r"at step \d+", line[0]) and "No checkpoint has been written yet" in line[0], line[0]


def test_a_signal_during_the_final_save_says_the_run_completes(tiny, tmp_path):
    """issue 24: SIGTERM during the final save (test hook: OMNISHARD_FAULT=RANK:0:term, step 0 = the start of the
    final save) is not acted on: the line says so (not 'stopping at the end of the step'), the run completes with
    its final_model and exit 0, and the rank says at the end that the signal was not acted on."""
    out = tmp_path / "o"
    cmd = [*MPIRUN, "-np", "2", *sft_cmd(tiny, out, ["--max_steps", "2"])]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OMP_NUM_THREADS="1", OMNISHARD_FAULT="1:0:term"))
    assert p.returncode == 0, p.stderr
    assert "omnishard: rank 1: SIGTERM received during the final save" in p.stderr, p.stderr
    assert "the run completes and exits 0" in p.stderr and "stopping at the end of the step" not in p.stderr, p.stderr
    assert "omnishard: rank 1: SIGTERM received during the final save was not acted on: the run completed" in p.stderr
    assert (out / "final_model" / "model.safetensors").exists()
