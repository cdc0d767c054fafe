"""The device seam's guard backend (OMNISHARD_BACKEND=guard, src/kernels/ops_guard.c): the backend's memory is out
of the host's reach outside its own calls, so a run that reads a loss sum, a parameter term or a gradient norm on
the host without the seam's download stops with SIGSEGV (tests/unit/test_ops_guard.c: a host read does). A run on
it (training with parameter terms, a save, a resume; 2 ranks with the head's rows balanced) logs the numbers of the
CPU backend, bit for bit."""
import pytest

from omni_run import logs, run, tiny_slam

ARGS = ["--learning_rate", "2e-3", "--max_length", "64", "--save_steps", 2, "--gradient_accumulation_steps", 2,
        "--param_loss", "l2:0.01:group_decode_adapter", "--param_loss", "dummy:model.layers.0."]
KEYS = ("loss", "param_loss", "grad_norm", "head_rows_moved")


def steps(out):
    return [{k: x.get(k) for k in ("step", *KEYS)} for x in logs(out) if "loss" in x]


@pytest.mark.parametrize("ranks", [1, 2])
def test_guard_backend_trains_and_resumes_as_the_cpu_backend(tmp_path_factory, ranks):
    d = tiny_slam(tmp_path_factory, f"guard{ranks}", 8)

    def sft(out, backend, extra=()):
        args = ["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / out,
                "--max_steps", 3, *ARGS, *(["--deepspeed", "zero3"] if ranks > 1 else []), *extra]
        return run(args, np_=ranks if ranks > 1 else None, env={"OMNISHARD_BACKEND": backend}, timeout=180)

    sft("cpu", "cpu")
    sft("guard", "guard")
    sft("resumed", "guard", ["--resume_from_checkpoint", d / "guard" / "checkpoint-2"])
    want = steps(d / "cpu")
    assert [x["step"] for x in want] == [1, 2, 3] and all(x["param_loss"] for x in want), want
    assert steps(d / "guard") == want
    assert steps(d / "resumed") == want[2:]


def test_guard_backend_value_is_checked(tmp_path):
    p = run(["plan", "--model", "qwen2.5-0.5b"], check=False, env={"OMNISHARD_BACKEND": "gpu"})
    assert p.returncode == 2 and "OMNISHARD_BACKEND: expected cpu (the default) or guard" in p.stderr, p.stderr
