"""Where the time of a ZeRO-3 training step goes: `perf record` on every rank, symbols grouped by kind, next to the
step's phase times from logging.jsonl (time/*_s, docs/training.md). Issue 12's model (bench/vs_deepspeed.py: Qwen2.5-
0.5B layer shapes, 4 layers, V = 152000 + 4160, G = 3, tied, random weights, cached in bench/.cache), seq 512, batch
1 per rank, fp32, AdamW, recomputation, `--deepspeed zero3`; the first step (warm-up) is excluded from the phase
medians, not from the profile.

    .venv/bin/python bench/profile_step.py [--np 2] [--threads 1] [--seq 512] [--steps 3] [--build build]
        [--layers 4] [--top 25] [--stage 3] [--batch 1] [--accum 1]
    .venv/bin/python bench/profile_step.py --np 1 --seq 2048 --steps 3    # issue 12's seq 2048 (5.6 GB RSS)

With --threads 2 or more it also prints, per thread of each rank, where its samples fell from the first product
on: working, or waiting in the OpenMP runtime (libgomp spins before it sleeps), and for the waits whether the other
threads of the process were on a CPU at that moment (a sample of theirs within 1.5 sampling periods) or not (taken
off the CPU by the scheduler, or asleep): waits while the others work are the process's own imbalance and serial
code, waits while they are off the CPU come from a machine shared with other jobs.

Needs `perf` (Debian: linux-perf) and kernel.perf_event_paranoid <= 1 (or root). Not a test: figures are printed.

Model FLOPs per CPU second: the step's model FLOPs (bench_step.py's flops_per_step, as bench/vs_deepspeed.py counts
them: recomputation not counted, attention counted in full) per rank, over rank 0's CPU seconds of the step
(time/cpu_s, median over steps 2..) times the single-thread sgemm 2048^3 rate per CPU second measured in the same
run (bench/bench_gemm.c's sgemm_2048_cpu). With 1 thread per rank this is the share of the sgemm rate the step
reaches, estimated from CPU time: load on the other cores does not lower it (wall time under nice or on a shared
machine does). It counts what the rank computes, not its waits (a blocked MPI wait that polls counts as CPU, so
with 2 ranks it is a lower bound); the wall-clock figure against the sgemm rate of ranks x threads threads is
bench/vs_deepspeed.py's, on an idle machine. perf's sampling adds about 1% of CPU.
"""
import argparse, bisect, collections, glob, json, os, re, shutil, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_step import flops_per_step, gemm_omni, make_model, model_dir, write_samples, LABELS  # noqa: E402
from vs_deepspeed import SHAPE  # noqa: E402

# (group, test on "dso symbol"), first match wins
GROUPS = [
    ("bf16 products (oneDNN)", lambda d, s: "dnnl" in d or "brgemm" in s or "jit:" in s or d.startswith("[JIT]")),
    ("sgemm (OpenBLAS)", lambda d, s: "openblas" in d or re.search(r"gemm|_copy_|_oncopy|_incopy|_itcopy|_otcopy", s)),
    ("MPI / transport", lambda d, s: re.search(r"libmpi|open-pal|open-rte|mca_|libucp|libucs|libuct|libfabric|"
                                               r"libpmix|libevent|libhwloc", d)),
    ("OpenMP runtime (spin/wait)", lambda d, s: "libgomp" in d),
    ("kernel: page faults, zeroing", lambda d, s: d == "[kernel.kallsyms]" and re.search(
        r"clear_page|page_fault|do_anonymous|handle_mm|alloc_pages|rmqueue|__memcg|lru|folio|pte|zap_|free_pages|"
        r"release_pages|unmap", s)),
    ("kernel: other", lambda d, s: d == "[kernel.kallsyms]"),
    ("memset / memcpy (libc)", lambda d, s: re.search(r"mem(set|cpy|move)", s)),
    ("attention softmax", lambda d, s: "softmax" in s or "attention" in s or "used_keys" in s),
    ("cross-entropy", lambda d, s: "xent" in s),
    ("AdamW", lambda d, s: "adamw" in s),
    ("gradient norm / reduce add", lambda d, s: "grad_norm" in s or "ring_reduce" in s or "zr_grad" in s or
     "first_nonfinite" in s),
    ("norms, activations, rope, embedding", lambda d, s: re.search(r"norm|swiglu|gelu|relu|rope|embed|k_add|k_mul|"
                                                                   r"k_scale|elementwise", s)),
    ("libm", lambda d, s: "libm" in d),
]


def group_of(dso, sym):
    for name, f in GROUPS:
        if f(dso, sym):
            return name
    return "other"


def thread_waits(f, freq=499):
    """per thread of the process in perf file f: working / waiting in libgomp, the waits split by whether another
    thread of the process was on a CPU (working or waiting) at that moment"""
    out = subprocess.run(["perf", "script", "-i", f, "-F", "pid,tid,time,ip,sym,dso"], capture_output=True,
                         text=True).stdout
    rows = collections.defaultdict(list)
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)/(\d+)\s+([\d.]+):\s+[0-9a-f]+\s+(.*?)\s+\((\S+)\)\s*$", line)
        if m:
            rows[int(m.group(2))].append((float(m.group(3)), "libgomp" in m.group(5), "gemm" in m.group(4)))
    rows = {t: r for t, r in rows.items() if len(r) > 100}   # the compute threads (not MPI's helpers)
    if len(rows) < 2:
        return
    t0 = min(t for r in rows.values() for t, _, g in r if g)   # from the first product on (not the loading)
    win = 1.5 / freq
    times = {t: [x[0] for x in r] for t, r in rows.items()}

    def state(tid, t):   # None: no sample near t (off the CPU or asleep); else True while waiting in libgomp
        i = bisect.bisect_left(times[tid], t)
        near = [j for j in (i - 1, i) if 0 <= j < len(times[tid]) and abs(times[tid][j] - t) < win]
        return None if not near else rows[tid][min(near, key=lambda j: abs(times[tid][j] - t))][1]

    print(f"\nthreads of {os.path.basename(f)} (samples from the first product on):")
    print("| thread | samples | working | waiting (libgomp) | waits: others off the CPU | waits: another working |"
          "\n|---|---|---|---|---|---|")
    for tid in sorted(rows):
        n = wait = off = busy = 0
        for t, spin, _ in rows[tid]:
            if t < t0:
                continue
            n += 1
            if not spin:
                continue
            wait += 1
            st = [state(o, t) for o in rows if o != tid]
            off += all(x is None for x in st)
            busy += any(x is False for x in st)
        print(f"| {tid} | {n} | {100 * (n - wait) / n:.1f}% | {100 * wait / n:.1f}% | {100 * off / n:.1f}% | "
              f"{100 * busy / n:.1f}% |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=SHAPE["layers"])
    ap.add_argument("--build", default=os.environ.get("OMNISHARD_BUILD", "build"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "bench", ".cache"))
    ap.add_argument("--labels", default="random", choices=LABELS,
                    help="the samples' label layout (bench/bench_step.py write_samples)")
    ap.add_argument("--top", type=int, default=25, help="symbols listed")
    ap.add_argument("--stage", type=int, default=3, help="ZeRO stage")
    ap.add_argument("--batch", type=int, default=1, help="per-rank micro-batch")
    ap.add_argument("--accum", type=int, default=1, help="gradient accumulation steps")
    ap.add_argument("--torch_dtype", default="float32", choices=["float32", "bfloat16"])
    a = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("perf: not found (Debian: apt-get install linux-perf)")
    s = dict(SHAPE, layers=a.layers)
    os.makedirs(a.cache, exist_ok=True)
    mdir = model_dir(a.cache, s)
    make_model(mdir, s)
    n = a.np * a.batch * a.accum * a.steps
    data = write_samples(a.cache, "profile", n, s, a.seq, a.labels)
    tmp = tempfile.mkdtemp(prefix="omni_profile_", dir="/tmp")
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), OPENBLAS_NUM_THREADS=str(a.threads),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    exe = os.path.join(ROOT, a.build, "omnishard")
    wrap = f'exec perf record -q -F 499 -o {tmp}/perf.$OMPI_COMM_WORLD_RANK.data -- "$@"'
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(a.np), "sh", "-c", wrap, "sh", exe, "sft",
           "--model", mdir, "--dataset", data, "--zero_stage", str(a.stage), "--max_length", str(a.seq),
           "--max_steps", str(a.steps), "--torch_dtype", a.torch_dtype, "--learning_rate", "1e-5", "--lr_scheduler_type", "constant",
           "--warmup_steps", "0", "--weight_decay", "0", "--max_grad_norm", "1", "--gradient_checkpointing", "true",
           "--per_device_train_batch_size", str(a.batch), "--gradient_accumulation_steps", str(a.accum),
           "--save_only_model", "true", "--output_dir", f"{tmp}/out"]
    print(f"{a.np} rank(s) x {a.threads} thread(s), ZeRO-{a.stage}, batch {a.batch} x accumulation {a.accum}, "
          f"{a.torch_dtype}, seq {a.seq}, {a.layers} layers, {a.steps} steps; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    log = [json.loads(x) for x in open(f"{tmp}/out/logging.jsonl") if '"step_time_s"' in x]
    keys = ["step_time_s", "time/data_s", "time/compute_s", "time/gather_wait_s", "time/reduce_wait_s",
            "time/optimizer_s"]
    rows = log[1:] or log
    print("phases (median over steps 2..):", ", ".join(f"{k} {statistics.median(r[k] for r in rows):.3f}"
                                                       for k in keys))
    cpu = statistics.median(r["time/cpu_s"] for r in rows)
    _, flops, _ = flops_per_step(s, a.np * a.batch * a.accum, a.seq)   # samples per step
    gemm_omni(a.build, "env", 1)
    g1 = float(gemm_omni.last["sgemm_2048_cpu"])
    print(f"model FLOPs per rank and step {flops / a.np / 1e12:.3f} T over rank 0's {cpu:.2f} CPU s = "
          f"{flops / a.np / cpu / 1e9:.1f} GFLOP per CPU second; single-thread sgemm 2048^3 {g1:.1f} GFLOP per CPU "
          f"second: {flops / a.np / cpu / 1e9 / g1:.0%} of it")
    total = collections.Counter()
    syms = collections.Counter()
    for f in sorted(glob.glob(f"{tmp}/perf.*.data")):
        out = subprocess.run(["perf", "report", "-i", f, "--no-children", "--sort", "dso,sym", "--stdio",
                              "-F", "period,dso,sym"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            m = re.match(r"\s*(\d+)\s+(\S+)\s+\[[.k]\]\s+(.*\S)", line)
            if not m:
                continue
            period, dso, sym = int(m.group(1)), m.group(2), m.group(3)
            total[group_of(dso, sym)] += period
            syms[(dso, sym)] += period
    allp = sum(total.values()) or 1
    print("| where (all ranks' CPU time) | share |\n|---|---|")
    for g, p in total.most_common():
        print(f"| {g} | {100 * p / allp:.1f}% |")
    print(f"\ntop {a.top} symbols:")
    for (dso, sym), p in syms.most_common(a.top):
        print(f"  {100 * p / allp:5.1f}%  {sym}  ({dso})")
    if a.threads > 1:
        for f in sorted(glob.glob(f"{tmp}/perf.*.data")):
            thread_waits(f)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
