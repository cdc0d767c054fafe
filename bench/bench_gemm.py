#!/usr/bin/env python3
"""GEMM libraries at the training step's own shapes (Qwen2.5-0.5B: C 896, F 4864, 14/2 heads of 64, V 156160).

Builds bench/gemm_libs.c with every library that is installed (OpenBLAS always; oneDNN if <oneapi/dnnl/dnnl.h>
is found, BLIS if <blis.h> is; --prefix adds a folder holding include/ and lib/ trees, e.g. an unpacked .deb),
runs it single-threaded with the libraries alternating (A B C A B C, ROUNDS times) and prints, per shape, the
median GFLOP/s and the ratio to OpenBLAS sgemm, then the same over the step's mix of products (each shape weighted
by how often one layer / one head chunk computes it: time = sum of FLOPs / rate).

usage: .venv/bin/python bench/bench_gemm.py [--rows 512 2048] [--rounds 3] [--secs 0.3] [--prefix DIR]
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
C, F, H, KH, D, V = 896, 4864, 14, 2, 64, 156160


def shapes(rows):
    """(name, M, N, K, ta, tb, count per layer or head chunk): forward out = x w^T (NT), backward dx = dout w (NN)
    and dw = dout^T x (TN) of each linear; the head per 214-row logits chunk (k_xent_chunk_rows), a quarter of the
    vocabulary (one of the blocks k_gemm cuts it into); attention per 128-query block and head at full length."""
    out = []
    for lname, I, O, cnt in (("qo", C, H * D, 2), ("kv", C, KH * D, 2), ("gateup", C, F, 2), ("down", F, C, 1)):
        out += [(f"{lname}.fwd.{rows}", rows, O, I, 0, 1, cnt), (f"{lname}.dx.{rows}", rows, I, O, 0, 0, cnt),
                (f"{lname}.dw.{rows}", O, I, rows, 1, 0, cnt)]
    n, Vq = (1 << 25) // V, V // 4
    out += [(f"head.fwd.{n}", n, Vq, C, 0, 1, 0), (f"head.dx.{n}", n, C, Vq, 0, 0, 0), (f"head.dw.{n}", Vq, C, n, 1, 0, 0)]
    out += [(f"att.qk.{rows}", 128, rows, D, 0, 1, 0), (f"att.pv.{rows}", 128, D, rows, 0, 0, 0)]
    return out


def find_header(rel, prefixes):
    for p in prefixes:
        for inc in ("include", "include/x86_64-linux-gnu/blis-serial", "include/x86_64-linux-gnu/blis-openmp"):
            if os.path.exists(os.path.join(p, inc, rel)):
                return os.path.join(p, inc)
    return None


def build(prefix, out):
    prefixes = ([prefix] if prefix else []) + ["/usr"]
    cmd = ["mpicc", "-std=c11", "-D_GNU_SOURCE", "-O3", "-march=native", "-fopenmp", "-Isrc", "bench/gemm_libs.c"]
    cmd += [os.path.join("src/core", f) for f in sorted(os.listdir(os.path.join(ROOT, "src/core"))) if f.endswith(".c") and f != "version.c"]   # version.c: the build's generated os_version.h
    libs, rpath = ["-lopenblas"], []
    dnnl = find_header("oneapi/dnnl/dnnl.h", prefixes)
    if dnnl:
        base = os.path.dirname(dnnl.rstrip("/")) if dnnl.endswith("include") else dnnl
        lib = os.path.join(base, "lib/x86_64-linux-gnu")
        cmd += ["-DHAVE_DNNL", "-I" + dnnl, "src/kernels/gemm_bf16.c", "src/kernels/linear.c", "src/kernels/matmul.c", "src/kernels/gemm.c", "src/kernels/gemm_times.c"]
        libs += ["-L" + lib, "-ldnnl"]
        rpath.append(lib)
    blis = find_header("blis.h", prefixes)
    if blis:   # the serial build: k_gemm does the threading
        base = blis.split("/include")[0]
        lib = os.path.join(base, "lib/x86_64-linux-gnu", os.path.basename(blis) if "blis-" in blis else "")
        cmd += ["-DHAVE_BLIS"]
        libs += ["-L" + lib, "-l:libblis.so.4"]
        rpath.append(lib)
    cmd += ["-o", out] + libs + ["-lm", "-ldl"] + (["-Wl,-rpath," + ":".join(rpath)] if rpath else [])
    subprocess.run(cmd, cwd=ROOT, check=True)
    return bool(dnnl), bool(blis)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[512, 2048])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=float, default=0.3, help="timed seconds per library, shape and round")
    ap.add_argument("--prefix", help="extra folder with include/ and lib/x86_64-linux-gnu/ (an unpacked .deb)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build-bench"))
    a = ap.parse_args()
    os.makedirs(a.build, exist_ok=True)
    exe = os.path.join(a.build, "gemm_libs")
    build(a.prefix, exe)
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    flags = next((ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")), "")
    isa = [f for f in ("avx512f", "avx512_bf16", "amx_bf16") if f" {f}" in flags]
    print(f"cpu: {cpu}, {os.cpu_count()} cores, {' '.join(isa)}; 1 thread per library; median of {a.rounds} rounds")
    seen, table = set(), []
    for rows in a.rows:
        for s in shapes(rows):
            if s[0] not in seen:
                seen.add(s[0]), table.append(s)
    args = [f"{n}:{M}:{N}:{K}:{ta}:{tb}" for n, M, N, K, ta, tb, _ in table]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([exe, str(a.secs), str(a.rounds)] + args, cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr)
    runs, head = {}, ""
    for ln in r.stdout.splitlines():
        if ln.startswith("#"):
            head = ln[2:]
            continue
        name, lib, g = ln.split()
        runs.setdefault(name, {}).setdefault(lib, []).append(float(g))
    libs = head.split("libs=")[1].split(",")
    print(head.split()[0], "(OpenBLAS core type)")
    w = max(len(n) for n in runs) + 2
    print(f"{'shape (M x N x K, op)':<{w + 20}}" + "".join(f"{lib:>15}" for lib in libs) + "   (GFLOP/s; ratio to openblas)")
    med = {n: {lib: statistics.median(v) for lib, v in d.items()} for n, d in runs.items()}
    for n, M, N, K, ta, tb, _ in table:
        base = med[n]["openblas"]
        op = ("T" if ta else "N") + ("T" if tb else "N")
        cells = "".join(f"{med[n][lib]:>8.1f} {med[n][lib] / base:>5.2f}x" for lib in libs)
        print(f"{n:<{w}}{f'{M}x{N}x{K} {op}':<20}{cells}")
    for rows in a.rows:   # one decoder layer's linears: time = sum of FLOPs / rate
        mix = [(n, 2.0 * M * N * K * cnt) for n, M, N, K, ta, tb, cnt in shapes(rows) if cnt]
        t = {lib: sum(fl / (med[n][lib] * 1e9) for n, fl in mix) for lib in libs}
        print(f"layer mix, {rows} rows: " + ", ".join(f"{lib} {t['openblas'] / t[lib]:.2f}x" for lib in libs)
              + "  (speed vs openblas)")


if __name__ == "__main__":
    main()
