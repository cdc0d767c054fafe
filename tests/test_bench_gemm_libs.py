"""bench/bench_gemm.py builds bench/gemm_libs.c against the sources it names and runs it: the figures in
docs/performance.md ("GEMM libraries at the step's shapes", "oneDNN's two bf16 kernels") come from it. Its source
list went stale once (src/kernels/gemm_times.c was missing) without any test noticing; this builds it and runs one
small shape on every library it finds, so a broken build or a library that fails its call fails here."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import bench_gemm  # noqa: E402
import pytest  # noqa: E402


def test_gemm_libs_builds_and_runs(tmp_path):
    flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "")
    if " avx512f" not in flags:
        pytest.skip("this CPU has no AVX-512, which bench/gemm_libs needs (it times oneDNN's bf16 matmul); training does not use this bench")
    exe = tmp_path / "gemm_libs"
    bench_gemm.build(None, str(exe))
    r = subprocess.run([str(exe), "0.01", "1", "small:24:40:56:1:0"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stdout + r.stderr
    libs = next(l for l in r.stdout.splitlines() if l.startswith("# core=")).split("libs=")[1].split(",")
    assert "openblas" in libs, r.stdout
    rates = {l.split()[1]: float(l.split()[2]) for l in r.stdout.splitlines() if l.startswith("small ")}
    assert set(rates) == set(libs) and all(v > 0 for v in rates.values()), r.stdout
