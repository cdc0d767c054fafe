"""How the f32 collectives travel between ranks (src/zero/transport.c, transport_open; docs/zero.md
"Transport"): decided once after MPI starts from every rank's host and GPU and OMNISHARD_COMM. On the CPU (--device
cpu) the collectives stay MPI in place and nothing is said; with OMNISHARD_TEST_DEVICE=cuda on one GPU (the device
check), two ranks share it: MPI through host buffers, said once. OMNISHARD_COMM=nccl where NCCL cannot run (a CPU
rank, two ranks on one GPU) stops before any work, naming why. The choice itself: tests/unit/test_transport.c."""
import pytest
from omni_run import DEVICE, run, sft, tiny_slam


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_slam(tmp_path_factory, "transport", 4)


def args(d, out):
    return ["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", out, "--max_steps", 1,
            "--save_steps", 0, "--max_length", 32, "--deepspeed", "zero3"]


def test_two_ranks_say_their_transport_once(tiny, tmp_path):
    p = run(args(tiny, tmp_path / "o"), np_=2)
    lines = [l for l in p.stderr.splitlines() if "collectives:" in l]
    if DEVICE and DEVICE.startswith("cuda"):   # one GPU, two ranks: the host buffers, said by rank 0 only
        assert len(lines) == 1 and "MPI through host buffers, not NCCL: ranks 0 and 1 share GPU" in lines[0], p.stderr
    else:
        assert lines == [], p.stderr   # the CPU: MPI in place, as before


def test_forced_nccl_where_it_cannot_run_stops_naming_why(tiny, tmp_path):
    p = run(args(tiny, tmp_path / "o"), np_=2, check=False, env={"OMNISHARD_COMM": "nccl"})
    assert p.returncode == 2, p.stderr
    why = "ranks 0 and 1 share GPU" if DEVICE and DEVICE.startswith("cuda") else "rank 0 runs on the CPU"
    assert f"OMNISHARD_COMM=nccl: {why}" in p.stderr, p.stderr
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir()), "stopped before any work"


def test_forced_mpi_runs_and_a_bad_value_is_refused(tiny, tmp_path):
    run(args(tiny, tmp_path / "o"), np_=2, env={"OMNISHARD_COMM": "mpi"})
    p = run(args(tiny, tmp_path / "b"), np_=2, check=False, env={"OMNISHARD_COMM": "gloo"})
    assert p.returncode != 0 and "OMNISHARD_COMM: expected mpi" in p.stderr and "got 'gloo'" in p.stderr, p.stderr
