"""--device cpu|cuda|cuda:N and --tf32 (sft, infer; docs/operations.md "GPUs"): the value is checked, a build without
the CUDA backend names `make CUDA=1`, and a CUDA build (make CUDA=1 -> build-cuda/, or OMNISHARD_CUDA_BUILD) on a
machine without a GPU says so with the CUDA error string, and trains on --device cpu exactly as the CPU build."""
import os, pathlib, subprocess
import pytest

from conftest import BIN, ROOT
from omni_run import logs, run, tiny_slam

CUDA_BUILD = ROOT / os.environ.get("OMNISHARD_CUDA_BUILD", "build-cuda")
CUDA_BIN = CUDA_BUILD / "omnishard"
needs_cuda_build = pytest.mark.skipif(not CUDA_BIN.exists(), reason=f"the CUDA build's no-GPU checks need {CUDA_BIN}: build it with `make CUDA=1` (no GPU needed)")


def no_gpu():
    return not any(pathlib.Path("/dev").glob("nvidia[0-9]*"))


def cmd(kind, tmp_path, *extra):
    if kind == "sft":
        return ["sft", "--model", tmp_path / "nomodel", "--dataset", tmp_path / "d.jsonl", "--output_dir", tmp_path / "o", *extra]
    return ["infer", "--model", tmp_path / "nomodel", "--question", "hi", *extra]


def stderr_of(binary, args):
    p = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, (p.returncode, p.stderr)
    return p.stderr


@pytest.mark.parametrize("kind", ["sft", "infer"])
@pytest.mark.parametrize("dev", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_in_a_cpu_build_names_make_cuda(tmp_path, kind, dev):
    if BIN.parent.resolve() == CUDA_BUILD.resolve():
        pytest.skip("OMNISHARD_BUILD is the CUDA build, which has the backend whose absence this checks in a plain build")
    err = stderr_of(BIN, cmd(kind, tmp_path, "--device", dev))
    assert "--device cuda: this omnishard was built without the CUDA backend; build it with `make CUDA=1`" in err, err


@pytest.mark.parametrize("kind", ["sft", "infer"])
@pytest.mark.parametrize("dev", ["npu", "gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1024", "CUDA"])
def test_a_device_value_is_checked(tmp_path, kind, dev):
    err = stderr_of(BIN, cmd(kind, tmp_path, "--device", dev))
    assert f"--device: '{dev}' is not supported (supported: cpu, cuda or cuda:N)" in err, err


@pytest.mark.parametrize("kind", ["sft", "infer"])
def test_tf32_needs_a_gpu(tmp_path, kind):
    err = stderr_of(BIN, cmd(kind, tmp_path, "--tf32", "true"))
    dev = "guard" if os.environ.get("OMNISHARD_TEST_DEVICE") == "guard" else "cpu"   # the suite's device (conftest)
    assert f"--tf32 true: TF32 is the number format of a CUDA GPU's tensor cores; on --device {dev}" in err, err


def test_tf32_with_bf16_is_refused(tmp_path):
    err = stderr_of(BIN, cmd("sft", tmp_path, "--tf32", "true", "--device", "cuda", "--torch_dtype", "bfloat16"))
    assert "--tf32 true with --torch_dtype bfloat16: every product runs on bf16 inputs already" in err, err


def test_the_guard_hook_variable_is_refused_naming_the_option(tmp_path):
    """the guard backend is a --device value: the variable that chose it before stops every command naming it"""
    p = subprocess.run([str(BIN), *map(str, cmd("sft", tmp_path, "--device", "cuda"))], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, OMNISHARD_BACKEND="guard"))
    assert p.returncode == 2 and "OMNISHARD_BACKEND: no longer read (got 'guard'): it is the option --device guard" \
        in p.stderr, p.stderr


def cuda_check(name, timeout, *args):
    """runs the CUDA build's check program tests/cuda/NAME, which must exit 0 (on a GPU: its checks passed; without
    one: it said why it skipped)"""
    p = subprocess.run([str(CUDA_BUILD / "tests" / "cuda" / name), *args], capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    return p


@needs_cuda_build
def test_cuda_build_unit_checks():
    cuda_check("test_cuda_nogpu", 60, *(["nogpu"] if no_gpu() else []))


@needs_cuda_build
def test_cuda_gemm_checks_or_says_why_not():
    # on a GPU: every product against its definition (tests/cuda/test_cuda_gemm.c); here: the reason it cannot
    p = cuda_check("test_cuda_gemm", 300)
    if no_gpu():
        assert "test_cuda_gemm: skipped, no GPU: --device cuda: no usable CUDA device: CUDA driver version is " \
               "insufficient" in p.stdout, p.stdout
    else:
        assert "test_cuda_gemm: all" in p.stdout, p.stdout


@needs_cuda_build
def test_cuda_nccl_checks_or_says_why_not():
    # on a GPU: NCCL through the device transport with a one-rank communicator (tests/cuda/test_cuda_nccl.c)
    p = cuda_check("test_cuda_nccl", 120)
    if no_gpu():
        assert "test_cuda_nccl: skipped, no GPU: --device cuda: no usable CUDA device" in p.stdout, p.stdout
    else:
        assert "test_cuda_nccl: all" in p.stdout or "skipped, NCCL: libnccl.so.2 not found" in p.stdout, p.stdout


@needs_cuda_build
@pytest.mark.skipif(not no_gpu(), reason="a GPU is present, and this checks what the CUDA build says on a machine without one")
@pytest.mark.parametrize("kind", ["sft", "infer"])
@pytest.mark.parametrize("dev", ["cuda", "cuda:1"])
def test_cuda_build_without_a_gpu_gives_the_cuda_error(tmp_path, kind, dev):
    err = stderr_of(CUDA_BIN, cmd(kind, tmp_path, "--device", dev))
    # the toolkit's static runtime finds no driver here (the PyPI nvcc needs none): CUDA's own words
    assert "--device cuda: no usable CUDA device: CUDA driver version is insufficient for CUDA runtime version" in err, err


@needs_cuda_build
def test_cuda_build_trains_on_the_cpu_as_the_cpu_build(tmp_path_factory):
    d = tiny_slam(tmp_path_factory, "devcpu", 4)
    args = ["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--max_steps", 2, "--max_length", 64,
            "--learning_rate", "2e-3"]
    run([*args, "--output_dir", d / "cpu"])
    p = subprocess.run([str(CUDA_BIN), *map(str, args), "--output_dir", str(d / "cuda"), "--device", "cpu"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    keys = ("step", "loss", "grad_norm")
    want = [{k: x.get(k) for k in keys} for x in logs(d / "cpu") if "loss" in x]
    assert len(want) == 2 and [{k: x.get(k) for k in keys} for x in logs(d / "cuda") if "loss" in x] == want


# ---- omnishard plan --device cuda: device memory per GPU, as the CUDA backend lays it out ----

def plan_rows(binary, *args):
    p = subprocess.run([str(binary), "plan", "--model", "qwen2.5-0.5b", "--max_length", "512", *args],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rows = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) >= 9 and f[0] in "0123" and f[1] in ("yes", "no"):
            rows[(f[0], f[1])] = [float(x) for x in f[2:9]]
    return rows, p.stdout


def test_plan_device_cuda_counts_the_fused_attention_and_the_device_baseline():
    cpu, _ = plan_rows(BIN)
    gpu, out = plan_rows(BIN, "--device", "cuda", "--device_memory", "80GB")
    # qwen2.5-0.5b: 24 layers, 14 heads; the CPU keeps the probabilities [H,T,T] per layer, the fused kernel its
    # log-sum-exp [H,T]: without recomputation every layer's, with it one layer's (4 bytes a float)
    per_layer = 4 * 14 * (512 * 512 - 512) / 1e9
    for (stage, rc), c in cpu.items():
        g = gpu[(stage, rc)]
        assert c[:4] == g[:4], (stage, rc, c, g)   # params, grads, optimizer, buffers
        assert abs((c[4] - g[4]) - per_layer * (24 if rc == "no" else 1)) <= 0.0015, (stage, rc, c[4], g[4])
        # total = the step's buffers + cuBLASLt's 32 MiB workspace + the context estimate (0.5 GB)
        assert abs(g[5] - (sum(g[:5]) + 0.0335544 + 0.5)) <= 0.003, (stage, rc, g)
    assert "device memory per GPU" in out and "fits" in out


def test_plan_device_cuda_bf16_is_two_bytes_on_cublaslt():
    _, out = plan_rows(BIN, "--device", "cuda", "--torch_dtype", "bfloat16")
    assert "bf16 mixed precision on the cuBLASLt path" in out and "(2 bytes per element)" in out, out


def test_plan_tf32_on_the_cpu_is_refused():
    p = subprocess.run([str(BIN), "plan", "--model", "qwen2.5-0.5b", "--tf32", "true"], capture_output=True, text=True)
    assert p.returncode == 2 and "--tf32 true: TF32 is the number format" in p.stderr, p.stderr


@needs_cuda_build
@pytest.mark.parametrize("extra", [[], ["--torch_dtype", "bfloat16"]])
def test_plan_device_cuda_is_the_same_in_both_builds(extra):
    # the CPU build counts the fused attention's stats by cuda_none.c's formula, the CUDA build by the kernel's
    assert plan_rows(BIN, "--device", "cuda", *extra)[1] == plan_rows(CUDA_BIN, "--device", "cuda", *extra)[1]
