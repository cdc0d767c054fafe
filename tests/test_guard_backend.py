"""The device seam's guard backend (OMNISHARD_BACKEND=guard, src/kernels/ops_guard.c): the backend's memory is out
of the host's reach outside its own calls, so a run that reads a loss sum, a parameter term or a gradient norm on
the host without the seam's download stops with SIGSEGV (tests/unit/test_ops_guard.c: a host read does). A run on
it (training with parameter terms, a save, a resume; 2 ranks with the head's rows balanced) logs the numbers of the
CPU backend, bit for bit."""
import re

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


# ---- the ZeRO runtime's buckets (parameters, gradients, moments, gathered buckets) on the guard's memory ----
def run_both(d, args, ranks, timeout=180):
    """sft with args on the CPU backend into d/cpu and on the guard into d/guard; the guard's output directory"""
    for backend in ("cpu", "guard"):
        a = ["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / backend, *args]
        run(a, np_=ranks if ranks > 1 else None, env={"OMNISHARD_BACKEND": backend}, timeout=timeout)


def same_files(a, b, names):
    for f in names:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


RUNTIME = ["--learning_rate", "2e-3", "--max_length", "64", "--max_steps", 3, "--gradient_accumulation_steps", 2,
           "--save_steps", 2, "--trainable_embed_rows", "new"]


@pytest.mark.parametrize("ranks,stage,dtype", [(1, 0, "float32"), (1, 3, "bfloat16"), (2, 0, "float32"),
                                               (2, 1, "bfloat16"), (2, 2, "float32"), (2, 3, "bfloat16"),
                                               (2, 3, "float32")])
def test_guard_runtime_trains_saves_and_exports_as_the_cpu_backend(tmp_path_factory, ranks, stage, dtype):
    """Every ZeRO stage at 1 and 2 ranks (the collectives staged through host buffers on the guard), fp32 and bf16
    (the rounded copies, the stage 3 gather in bf16): the logged numbers, the checkpoint's rank files and the
    exported model are the CPU backend's bytes; an export from the checkpoint too."""
    d = tiny_slam(tmp_path_factory, f"grt{ranks}{stage}{dtype[:2]}", 8)
    run_both(d, [*RUNTIME, "--zero_stage", stage, "--torch_dtype", dtype], ranks)
    assert steps(d / "guard") == steps(d / "cpu") and len(steps(d / "cpu")) == 3
    ck = [f"rank-{r:05d}.safetensors" for r in range(ranks)]
    same_files(d / "cpu" / "checkpoint-2", d / "guard" / "checkpoint-2", ck)
    same_files(d / "cpu" / "final_model", d / "guard" / "final_model", ["model.safetensors", "slam_omni.safetensors"])
    for backend in ("cpu", "guard"):
        run(["export", "--checkpoint", d / backend / "checkpoint-2", "--output_dir", d / f"x{backend}"],
            np_=ranks if ranks > 1 else None, env={"OMNISHARD_BACKEND": backend})
    same_files(d / "xcpu", d / "xguard", ["model.safetensors", "slam_omni.safetensors"])


@pytest.mark.parametrize("merge", ["true", "false"])
def test_guard_runtime_lora_as_the_cpu_backend(tmp_path_factory, merge):
    """LoRA at ZeRO-3 on 2 ranks with dropout, resumed: the losses, the merged export (the merge's product on the
    backend) or the base + adapter directory are the CPU backend's bytes."""
    d = tiny_slam(tmp_path_factory, f"glora{merge}", 8)
    lora = ["--train_type", "lora", "--lora_rank", 4, "--lora_alpha", 8, "--merge_lora", merge]
    run_both(d, [*RUNTIME, "--deepspeed", "zero3", *lora], 2)
    assert steps(d / "guard") == steps(d / "cpu")
    files = ["model.safetensors"] + (["lora_adapter/adapter_model.safetensors"] if merge == "false" else [])
    same_files(d / "cpu" / "final_model", d / "guard" / "final_model", files)
    args = ["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / "resumed", *RUNTIME,
            "--deepspeed", "zero3", *lora, "--resume_from_checkpoint", d / "guard" / "checkpoint-2"]
    run(args, np_=2, env={"OMNISHARD_BACKEND": "guard"}, timeout=180)
    assert steps(d / "resumed") == steps(d / "cpu")[2:]
    same_files(d / "cpu" / "final_model", d / "resumed" / "final_model", files)


@pytest.mark.parametrize("ranks", [1, 2])
def test_guard_runtime_stops_on_non_finite_as_the_cpu_backend(tmp_path_factory, ranks):
    """A huge learning rate: the guard stops at the CPU backend's step naming the same first non-finite parameter
    (the check runs on the backend, its answers read once)."""
    d = tiny_slam(tmp_path_factory, f"gnan{ranks}", 6)
    said = {}
    for backend in ("cpu", "guard"):
        p = run(["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / backend,
                 "--max_steps", 12, "--learning_rate", "1e10", "--max_grad_norm", "0", "--save_steps", 0,
                 *(["--deepspeed", "zero3"] if ranks > 1 else [])], np_=ranks if ranks > 1 else None, check=False,
                env={"OMNISHARD_BACKEND": backend}, timeout=180)
        m = re.search(r"step (\d+): non-finite .*first parameter with a non-finite \w+: '([^']+)'", p.stderr)
        assert p.returncode > 0 and m, p.stderr
        said[backend] = m.groups()
    assert said["guard"] == said["cpu"], said
