"""omnishard vs DeepSpeed ZeRO-3, side by side on the same SLAM-Omni model, data and machine (issue 12).

usage: .venv/bin/python bench/vs_deepspeed.py [--seq 512,2048] [--np 2,1] [--rounds 3] [--steps 4] [--layers 4]
           [--threads T] [--dtype float32,bfloat16] [--build build] [--base BUILD] [--cache bench/.cache]
           [--labels random|slam-omni] [--quick]

Model: Qwen2.5-0.5B layer shapes (hidden 896, intermediate 4864, 14 heads, 2 kv heads), --layers layers (4),
vocabulary T = 152000 + A = 4160, G = 3 with the group-decode adapter, tied, random weights; written once by
bench/bench_step.py's make_model into --cache (git-ignored). Samples: bench/bench_step.py's write_samples, every
sample exactly --seq tokens long, 2 * steps of them (one epoch covers a 2-rank run); --labels random (default:
tests/oracle/slam_omni_ref.py's make_data) or slam-omni (SLAM-Omni's layout: prompt and speech without targets,
the answer's text shorter than its audio).
Both sides: fp32 (--dtype float32) or bf16 mixed precision (--dtype bfloat16: DeepSpeed's bf16 mode, i.e. the model
in bf16, bf16 parameters gathered and computed with, fp32 master weights and AdamW, the cross-entropy on fp32 logits
as transformers' causal-LM loss does; omnishard --torch_dtype bfloat16, docs/training.md), batch 1 per rank, no accumulation, AdamW (lr 1e-5, betas 0.9/0.999, eps 1e-8, weight decay 0),
constant learning rate without warm-up, gradient clipping at 1, activation recomputation, ZeRO-3, ranks x threads
(threads per rank: --threads, default cores // ranks), no CPU binding on either side.
- DeepSpeed (pip release in bench/requirements.txt, DS_ACCELERATOR=cpu, gloo): bench/ds_train.py under
  torch.distributed.run. Its shared-memory comm op is JIT-built once up front, without a time limit (a build killed
  midway leaves a lock that makes every later run hang; the bench then names the lock file to delete).
- omnishard: mpirun -np N build/omnishard sft --deepspeed zero3 ... (the options above).
The sides run alternately, one at a time (round k: DeepSpeed then omnishard). Per side: median step time over
every step but each run's first (warm-up), peak RSS per rank (VmHWM of each rank process, polled from /proc every
0.2 s while it runs; the largest over ranks and rounds), model GFLOP/s with
  flops = 6 * P_mm * tokens + 12 * layers * tokens * L * H * D   (bench/bench_step.py's flops_per_step: every matrix
  product's weights incl. lm_head over T+A columns and the adapter; attention counted in full, no recomputation)
against the sgemm 2048^3 rate measured in the same run with ranks * threads threads (torch.mm, i.e. oneMKL, the
library DeepSpeed's side uses; and omnishard's OpenBLAS through bench/bench_gemm.c), and the ratios. In bf16 the
bf16 GEMM rates are printed too (torch.mm on bf16 2048^3; omnishard's bf16 linear at the MLP shapes).
Loss check: every run's per-step losses against the first DeepSpeed run's, relative difference <= --loss_rtol
(default 1e-4 in fp32: different reduction orders drift by ~1e-6 per step here; a wrong loss, data order or
update differs by far more; --bf16_loss_rtol, default 1e-2, in bf16, where DeepSpeed computes activations in bf16
and omnishard in fp32 around bf16 products); a failure is printed and the exit status is 1.
--base BUILD: omnishard-only A/B: the DeepSpeed side is replaced by BUILD/omnishard (e.g. the build before a change,
  made from `git archive main` in /tmp), run the same way; the ratios are then omnishard / base.
--quick: a tiny model (hidden 64, 2 layers, A = 64), seq 64, 2 rounds x 3 steps: checks the bench end to end.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_step import flops_per_step, gemm_omni, make_model, model_dir, write_samples, LABELS  # noqa: E402

SHAPE = dict(hidden=896, inter=4864, layers=4, heads=14, kv_heads=2, T=152000, A=4160, G=3, tied=True)
QUICK = dict(SHAPE, hidden=64, inter=128, layers=2, heads=4, kv_heads=2, A=64)
LR = 1e-5


def build_shm_op():
    """JIT-build DeepSpeed's shared-memory comm op once, with no time limit; refuse to start on a stale lock."""
    code = ("import os, torch.utils.cpp_extension as c; from deepspeed.accelerator import get_accelerator as g\n"
            "b = g().create_op_builder('ShareMemCommBuilder'); print(c._get_build_directory(b.NAME, False))")
    env = dict(os.environ, DS_ACCELERATOR="cpu")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"DeepSpeed is not usable ({p.stderr.strip()[-800:]}); install bench/requirements.txt")
    bdir = p.stdout.strip().splitlines()[-1]
    lock = os.path.join(bdir, "lock")
    if os.path.exists(lock):
        sys.exit(f"{lock}: a DeepSpeed op build holds this lock. If no build is running (a killed one left it), "
                 f"delete it (rm {lock}) and start again; otherwise wait for that build to finish")
    t0 = time.time()
    print(f"building DeepSpeed's shm comm op in {bdir} (once; minutes on 2 cores, not interrupted)", flush=True)
    code = ("from deepspeed.accelerator import get_accelerator as g\n"
            "g().create_op_builder('ShareMemCommBuilder').load(verbose=False)")
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    print(f"  ready ({time.time() - t0:.0f} s)", flush=True)


def torch_sgemm(threads, dtype="float32"):
    code = ("import time, torch\ntorch.set_num_threads(%d)\nx, y = torch.randn(2048, 2048).to(torch.%s), "
            "torch.randn(2048, 2048).to(torch.%s)\n"
            "b = 1e30\nfor i in range(6):\n t = time.perf_counter(); torch.mm(x, y); d = time.perf_counter() - t\n"
            " b = min(b, d) if i else b\nprint(2 * 2048 ** 3 / b * 1e-9)" % (threads, dtype, dtype))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return float(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                text=True).stdout.split()[-1])


def vm_hwm(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def run_polled(cmd, env, is_rank):
    """Run cmd (stdout+stderr to a temp file), polling the VmHWM of every descendant process is_rank(cmdline)
    accepts. Returns (return code, output tail, {pid: peak bytes}, wall seconds)."""
    import psutil
    peaks, done = {}, threading.Event()
    log = tempfile.TemporaryFile(mode="w+")
    t0 = time.time()
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

    def poll():
        root = psutil.Process(p.pid)
        while not done.is_set():
            try:
                kids = root.children(recursive=True)
            except psutil.Error:
                kids = []
            for k in kids:
                try:
                    if is_rank(k.cmdline()):
                        v = vm_hwm(k.pid)
                        if v:
                            peaks[k.pid] = max(v, peaks.get(k.pid, 0))
                except psutil.Error:
                    pass
            done.wait(0.2)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    rc = p.wait()
    done.set()
    th.join()
    log.seek(0)
    return rc, log.read()[-4000:], peaks, time.time() - t0


def run_ds(a, mdir, data, np_, threads, seq, port, dtype):
    out = tempfile.mktemp(prefix="vs_ds_", suffix=".json", dir="/tmp")
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(np_), "--master_port", str(port),
           "bench/ds_train.py", "--model", mdir, "--data", data, "--seq", str(seq), "--steps", str(a.steps),
           "--threads", str(threads), "--lr", str(LR), "--out", out] + (["--bf16"] if dtype == "bfloat16" else [])
    rc, tail, peaks, wall = run_polled(cmd, env, lambda c: any(x.endswith("ds_train.py") for x in c)
                                       and "torch.distributed.run" not in c)
    if rc or not os.path.exists(out):
        sys.exit(f"DeepSpeed run failed ({rc}): {' '.join(cmd)}\n{tail}")
    r = json.load(open(out))
    os.remove(out)
    r.update(peaks=sorted(peaks.values()), wall_s=wall)
    return r


def run_omni(a, mdir, data, np_, threads, seq, dtype, build=None):
    out = tempfile.mkdtemp(prefix="vs_omni_", dir="/tmp")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    exe = os.path.join(ROOT, build or a.build, "omnishard")
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np_), exe, "sft", "--model", mdir,
           "--dataset", data, "--deepspeed", "zero3", "--max_length", str(seq), "--max_steps", str(a.steps),
           "--learning_rate", str(LR), "--lr_scheduler_type", "constant", "--warmup_steps", "0",
           "--weight_decay", "0", "--max_grad_norm", "1", "--gradient_checkpointing", "true",
           "--per_device_train_batch_size", "1", "--gradient_accumulation_steps", "1", "--save_only_model", "true",
           "--torch_dtype", dtype, "--output_dir", out]
    rc, tail, peaks, wall = run_polled(cmd, env, lambda c: bool(c) and os.path.basename(c[0]) == "omnishard")
    if rc:
        sys.exit(f"omnishard run failed ({rc}): {' '.join(cmd)}\n{tail}")
    log = [json.loads(x) for x in open(os.path.join(out, "logging.jsonl")) if '"step_time_s"' in x]
    shutil.rmtree(out, ignore_errors=True)
    return dict(times=[r["step_time_s"] for r in log], losses=[r["loss"] for r in log],
                grad_norms=[r.get("grad_norm") for r in log], peaks=sorted(peaks.values()),
                rank0_logged_gb=log[-1]["peak_rss_gb"], wall_s=wall)


def one_config(a, s, mdir, np_, seq, dtype):
    threads = a.threads or max(1, (os.cpu_count() or 1) // np_)
    n = 2 * a.steps
    data = write_samples(a.cache, "vs_ds", n, s, seq, a.labels)
    p_mm, flops, attn = flops_per_step(s, np_, seq)
    print(f"\n== {dtype}, seq {seq}, {np_} rank(s) x {threads} thread(s), {a.rounds} rounds x {a.steps} steps; "
          f"flops/step = 6 * {p_mm / 1e6:.1f}M * {np_ * seq} + {attn / 1e9:.1f}G = {flops / 1e12:.4f} TFLOP; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    g_torch = torch_sgemm(np_ * threads)
    core, g_blas = gemm_omni(a.build, "env", np_ * threads)
    print(f"sgemm 2048^3 at {np_ * threads} threads: torch.mm (oneMKL) {g_torch:.1f} GFLOP/s, "
          f"OpenBLAS ({core}) {g_blas:.1f} GFLOP/s", flush=True)
    if dtype == "bfloat16":
        kv = gemm_omni.last
        bl = [float(kv[k]) for k in ("bf16_linear_512x896x4864", "bf16_linear_512x4864x896") if k in kv]
        print(f"bf16 GEMM at {np_ * threads} threads: torch.mm bf16 2048^3 {torch_sgemm(np_ * threads, dtype):.1f} "
              f"GFLOP/s; omnishard bf16 linear at the MLP shapes ({kv.get('bf16_path', '?')} path) "
              f"{statistics.mean(bl) if bl else float('nan'):.1f} GFLOP/s", flush=True)
    ref_side = "base" if a.base else "DeepSpeed"
    runs = {ref_side: [], "omnishard": []}
    for k in range(a.rounds):
        for side in runs:
            r = (run_ds(a, mdir, data, np_, threads, seq, 29500 + k, dtype) if side == "DeepSpeed"
                 else run_omni(a, mdir, data, np_, threads, seq, dtype, a.base if side == "base" else None))
            runs[side].append(r)
            if "param_dtype" in r and k == 0:
                print(f"DeepSpeed's parameters: {r['param_dtype']}", flush=True)
            print(f"round {k + 1} {side:<9}: steps {' '.join(f'{t:.3f}' for t in r['times'])} s; peak RSS/rank "
                  f"{' '.join(f'{x / 1e9:.2f}' for x in r['peaks'])} GB; losses "
                  f"{' '.join(f'{x:.6f}' for x in r['losses'])}; load {os.getloadavg()[0]:.2f}", flush=True)
    ref_l = runs[ref_side][0]["losses"]
    worst, ok = 0.0, True
    for side, rs in runs.items():
        for r in rs:
            if len(r["losses"]) != len(ref_l):
                ok = False
                continue
            for x, y in zip(r["losses"], ref_l):
                worst = max(worst, abs(x - y) / max(abs(y), 1e-12))
    tol = a.bf16_loss_rtol if dtype == "bfloat16" else a.loss_rtol
    ok = ok and worst <= tol
    print(f"losses: largest relative difference to {ref_side}'s first run {worst:.2e} "
          f"({'OK' if ok else 'FAIL'}, tolerance {tol:g})")
    res = {}
    print(f"{'side':<10} {'s/step':>8} {'GFLOP/s':>8} {'of MKL':>7} {'of OpenBLAS':>11} {'peak RSS/rank':>13}")
    for side, rs in runs.items():
        t = statistics.median([x for r in rs for x in r["times"][1:]] or [x for r in rs for x in r["times"]])
        rss = max(x for r in rs for x in r["peaks"]) if any(r["peaks"] for r in rs) else float("nan")
        gf = flops / t / 1e9
        res[side] = (t, rss)
        print(f"{side:<10} {t:8.3f} {gf:8.1f} {gf / g_torch:7.0%} {gf / g_blas:11.0%} {rss / 1e9:11.2f}GB")
    (to, ro), (td, rd) = res["omnishard"], res[ref_side]
    pairs = [o["times"][1:] and d["times"][1:] and statistics.median(o["times"][1:]) / statistics.median(d["times"][1:])
             for d, o in zip(runs[ref_side], runs["omnishard"])]
    print(f"omnishard / {ref_side}: step time {to / td:.2f}x (per round {' '.join(f'{x:.2f}' for x in pairs if x)}), "
          f"peak RSS per rank {ro / rd:.2f}x")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", default="512,2048", help="comma-separated sequence lengths")
    ap.add_argument("--np", default="2,1", help="comma-separated rank counts")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4, help="optimizer steps per run (the first is warm-up)")
    ap.add_argument("--layers", type=int, default=SHAPE["layers"])
    ap.add_argument("--threads", type=int, default=0, help="threads per rank (default: cores // ranks)")
    ap.add_argument("--build", default=os.environ.get("OMNISHARD_BUILD", "build"))
    ap.add_argument("--base", default="", help="omnishard-only A/B: this build folder's omnishard in place of DeepSpeed")
    ap.add_argument("--cache", default=os.path.join(ROOT, "bench", ".cache"))
    ap.add_argument("--labels", default="random", choices=LABELS,
                    help="the samples' label layout (bench/bench_step.py write_samples)")
    ap.add_argument("--dtype", default="float32", help="comma-separated: float32, bfloat16")
    ap.add_argument("--loss_rtol", type=float, default=1e-4)
    ap.add_argument("--bf16_loss_rtol", type=float, default=1e-2)
    ap.add_argument("--quick", action="store_true", help="tiny model, seq 64, 2 rounds x 3 steps")
    a = ap.parse_args()
    s = dict(SHAPE, layers=a.layers)
    if a.quick:
        s = dict(QUICK)
        a.seq, a.rounds, a.steps = "64", 2, 3
    dtypes = [x for x in a.dtype.split(",") if x]
    if not dtypes or any(x not in ("float32", "bfloat16") for x in dtypes):
        sys.exit(f"--dtype {a.dtype}: supported: float32, bfloat16 (comma-separated)")
    if a.steps < 2:
        sys.exit("--steps: at least 2 (the first step of each run is warm-up)")
    if not os.path.exists(os.path.join(ROOT, a.build, "omnishard")):
        sys.exit(f"{a.build}/omnishard: not built (run make)")
    if a.base and not os.path.exists(os.path.join(a.base, "omnishard")):
        sys.exit(f"--base {a.base}: no omnishard binary there")
    if not a.base:
        build_shm_op()
    os.makedirs(a.cache, exist_ok=True)
    mdir = model_dir(a.cache, s)
    make_model(mdir, s)
    print(f"model {mdir}: hidden {s['hidden']}, inter {s['inter']}, {s['layers']} layers, {s['heads']}/"
          f"{s['kv_heads']} heads, V = {s['T']} + {s['A']}, G = {s['G']}, tied; {a.dtype}, AdamW, recomputation, ZeRO-3")
    ok = True
    for dtype in dtypes:
        for seq in [int(x) for x in a.seq.split(",") if x]:
            for np_ in [int(x) for x in a.np.split(",") if x]:
                ok = one_config(a, s, mdir, np_, seq, dtype) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
