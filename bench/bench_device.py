"""The device check's bench (tools/device-check.sh, docs/performance.md "Device check"): one training step of the same
SLAM-Omni model in omnishard and in PyTorch on one GPU, in the same run: Qwen2.5-0.5B shapes with all 24 layers
(hidden 896, intermediate 4864, 14/2 heads, tied), vocabulary 152000 + 4160 = 156160, the G = 3 group-decode
adapter, seq 2048, bf16 mixed precision (fp32 weights, gradients and AdamW; bf16 products), no recomputation.

usage: python3 bench/bench_device.py --build BUILD --device cuda --out bench.json [--budget S] [--steps 8]
           [--batch 1] [--seq 2048] [--compile_budget S] [--cache DIR] [--tiny] [--prepare]
--device cpu --tiny: the same stages on a 2-layer model of 64 channels (the dry run of tools/device-check.sh).
--prepare: only write the model and data into --cache (the device check starts it during the build).

Sides, each in its own process, one after the other, each within its cap (gemm 30 s, omnishard 80 s, eager 70 s,
compile --compile_budget) and what is left of --budget:
- gemm: the device's dense bf16 rate, a 8192^3 torch.matmul on random data (cuBLASLt), median of 10 after 3;
  the MFU denominator (fp32 512^3 on the CPU for --tiny).
- omnishard: `omnishard sft --device cuda --torch_dtype bfloat16 --gradient_checkpointing false ...`; step time
  = logging.jsonl's step_time_s; its memory line on stderr (the allocator's peaks, cudaMemGetInfo's).
- torch eager: transformers' Qwen2ForCausalLM (sdpa attention) + tests/oracle/slam_omni_ref.py's forward_losses
  (the same loss: text and G audio cross-entropies, the adapter, weights 1/(G+1)), fp32 weights under
  torch.autocast(bfloat16), clip_grad_norm_ 1.0, torch.optim.AdamW (its default implementation on the device),
  lr 1e-5, no weight decay; step time around each step after a synchronisation.
- torch compile: the same with the model's forward through torch.compile, if it compiles within --compile_budget.
Figures: the median of the steps after the first (warm-up; for compile, the compilation); tokens/s = batch * seq /
step time; MFU = model FLOPs per step / step time / the gemm side's rate, model FLOPs = 6 * P_mm * tokens +
12 * layers * batch * seq^2 * H * D (bench/bench_step.py's flops_per_step: attention counted in full); peak device
memory: the device's used memory sampled by nvidia-smi every 0.1 s during the side, less the used memory before it
(the same measure for every side), beside each framework's own count.
"""
import argparse, json, os, re, shutil, statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_step import SHAPE, flops_per_step, make_model, model_dir, write_samples  # noqa: E402

TINY = dict(hidden=64, inter=128, layers=2, heads=4, kv_heads=2, T=1000, A=96, G=3, tied=True)


def log(msg):
    print(f"bench: {msg}", flush=True)


class MemPoll:
    """The device's used memory (nvidia-smi, MiB) sampled every 0.1 s from start to stop: peak - the first sample."""
    def __init__(self, device):
        self.on = device.startswith("cuda") and shutil.which("nvidia-smi")
        self.base = self.peak = None

    def _read(self):
        p = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                           capture_output=True, text=True, timeout=10)
        return float(p.stdout.split()[0]) if p.returncode == 0 and p.stdout.strip() else None

    def __enter__(self):
        if self.on:
            self.base = self.peak = self._read()
            self.stop = threading.Event()
            self.t = threading.Thread(target=self._loop, daemon=True)
            self.t.start()
        return self

    def _loop(self):
        while not self.stop.wait(0.1):
            v = self._read()
            if v is not None and self.peak is not None:
                self.peak = max(self.peak, v)

    def __exit__(self, *exc):
        if self.on:
            self.stop.set()
            self.t.join()

    def gb(self):
        return None if self.base is None else (self.peak - self.base) * 2 ** 20 / 1e9


def median_after_first(t):
    return statistics.median(t[1:] if len(t) > 1 else t) if t else None


# ---- the sides ----
def side_gemm(a):
    import torch
    dev = a.device
    if dev.startswith("cuda"):
        n, dtype = 8192, torch.bfloat16
    else:
        n, dtype = 512, torch.float32
    x, y = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
    times = []
    for i in range(13):
        if dev.startswith("cuda"):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            torch.matmul(x, y)
            e1.record()
            e1.synchronize()
            dt = e0.elapsed_time(e1) / 1e3
        else:
            t0 = time.perf_counter()
            torch.matmul(x, y)
            dt = time.perf_counter() - t0
        if i >= 3:
            times.append(dt)
    rate = 2 * n ** 3 / statistics.median(times)
    name = torch.cuda.get_device_name(0) if dev.startswith("cuda") else "cpu"
    return dict(tflops=rate / 1e12, shape=f"{n}^3 {str(dtype).removeprefix('torch.')}", device_name=name,
                torch=torch.__version__)


def side_omni(a, mdir, data):
    out = tempfile.mkdtemp(prefix="bench_device_omni_", dir=a.work)
    cmd = [os.path.join(a.build, "omnishard"), "sft", "--device", a.device, "--model", mdir, "--dataset", data,
           "--output_dir", out, "--max_steps", str(a.steps), "--torch_dtype", "bfloat16",
           "--max_length", str(a.seq), "--per_device_train_batch_size", str(a.batch),
           "--gradient_checkpointing", "false", "--learning_rate", "1e-5", "--lr_scheduler_type", "constant",
           "--weight_decay", "0", "--save_only_model", "true", "--save_strategy", "no"]
    log("$ " + " ".join(cmd))
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(min(os.cpu_count() or 1, 8)))
    with MemPoll(a.device) as mem:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.side_budget)
    if p.returncode:
        raise RuntimeError(f"omnishard sft failed ({p.returncode}): {p.stderr[-2000:]}")
    recs = [json.loads(x) for x in open(os.path.join(out, "logging.jsonl")) if x.strip()]
    recs = [r for r in recs if "step_time_s" in r]
    r = dict(times=[x["step_time_s"] for x in recs], losses=[x["loss"] for x in recs], smi_peak_gb=mem.gb(),
             peak_rss_gb=recs[-1].get("peak_rss_gb") if recs else None)
    # the CUDA backend's memory line (cli/device.c): peaks of the allocator and of cudaMemGetInfo
    m = re.search(r"device memory: peak ([\d.]+) GB requested .*?([\d.]+) GB held from cudaMalloc at most; the "
                  r"device's used memory peaked at ([\d.]+) GB", p.stderr)
    if m:
        r.update(requested_peak_gb=float(m.group(1)), reserved_peak_gb=float(m.group(2)),
                 device_used_peak_gb=float(m.group(3)))
    shutil.rmtree(out, ignore_errors=True)
    return r


def torch_worker(a):
    """PyTorch side in its own process (eager, or --torch-worker compile): prints one JSON line."""
    import torch
    import transformers
    from safetensors.torch import load_file
    from transformers import Qwen2ForCausalLM
    from oracle import slam_omni_ref as ref
    s = json.loads(a.shape)
    G, T, A, dev = s["G"], s["T"], s["A"], a.device
    cuda = dev.startswith("cuda")
    major = int(transformers.__version__.split(".")[0])
    kw = {"dtype": torch.float32} if major >= 5 else {"torch_dtype": torch.float32}   # the 4.x spelling
    model = Qwen2ForCausalLM.from_pretrained(a.model, **kw).to(dev)
    model.train()
    adapter = ref.Adapter(A, G)
    sd = load_file(os.path.join(a.model, "slam_omni.safetensors"))
    adapter.load_state_dict({k.removeprefix("group_decode_adapter."): v for k, v in sd.items()})
    adapter.to(dev)
    params = [p for p in model.parameters()] + [p for p in adapter.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    fwd = torch.compile(model) if a.torch_worker == "compile" else model
    data = ref.load_data(a.data, a.seq)
    ids, lab, mask = (x.to(dev) for x in ref.collate(data[:a.batch], 151643))
    w = [1.0 / (G + 1)] * (G + 1)
    times, losses = [], []
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for step in range(a.steps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16):
            terms = ref.forward_losses(fwd, adapter, ids, lab, mask, G, T, A, upcast=True, lazy=True)
        loss = sum(wt * s_ / c.clamp(min=1) for wt, (s_, c, _) in zip(w, terms))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss.detach()))
    r = dict(times=times, losses=losses, torch=torch.__version__, transformers=transformers.__version__,
             attn=model.config._attn_implementation, optimizer="AdamW (default implementation)")
    if cuda:
        r.update(allocated_peak_gb=torch.cuda.max_memory_allocated() / 1e9,
                 reserved_peak_gb=torch.cuda.max_memory_reserved() / 1e9)
    else:
        import resource
        r["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
    print(json.dumps(r), flush=True)


def side_torch(a, mdir, data, shape, kind, budget):
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", kind, "--model", mdir, "--data", data,
           "--device", a.device, "--steps", str(a.steps), "--seq", str(a.seq), "--batch", str(a.batch),
           "--shape", json.dumps(shape)]
    log(f"$ {sys.executable} bench/bench_device.py --torch-worker {kind} ... (budget {budget:.0f} s)")
    with MemPoll(a.device) as mem:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=budget)
    if p.returncode:
        raise RuntimeError(f"PyTorch {kind} failed ({p.returncode}): {p.stderr[-2000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["smi_peak_gb"] = mem.gb()
    return r


def summarize(res, flops, tokens):
    rate = res["gemm"].get("tflops") if isinstance(res.get("gemm"), dict) else None
    for name in ("omnishard", "torch_eager", "torch_compile"):
        r = res.get(name)
        if not isinstance(r, dict) or not r.get("times"):
            continue
        t = median_after_first(r["times"])
        r["step_s"] = t
        r["tokens_per_s"] = tokens / t
        r["tflops"] = flops / t / 1e12
        r["mfu"] = flops / t / (rate * 1e12) if rate else None
        if name == "torch_compile" and len(r["times"]) > 1:
            r["compile_s"] = r["times"][0] - t
        r["peak_gb"] = r.get("smi_peak_gb") if r.get("smi_peak_gb") is not None else (
            r.get("reserved_peak_gb") if r.get("reserved_peak_gb") is not None else r.get("peak_rss_gb"))
    o, e, c = (res.get(k) if isinstance(res.get(k), dict) else {} for k in ("omnishard", "torch_eager", "torch_compile"))
    tg = {}
    if o.get("mfu") is not None:
        tg["mfu >= 0.45"] = o["mfu"] >= 0.45
    if o.get("tokens_per_s") and e.get("tokens_per_s"):
        tg["tokens/s >= 1.2x eager"] = o["tokens_per_s"] >= 1.2 * e["tokens_per_s"]
    if o.get("tokens_per_s") and c.get("tokens_per_s"):
        tg["tokens/s >= 1.0x compile"] = o["tokens_per_s"] >= c["tokens_per_s"]
    if o.get("peak_gb") is not None and e.get("peak_gb") is not None:
        tg["peak memory <= eager"] = o["peak_gb"] <= e["peak_gb"]
    res["targets"] = tg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("OMNISHARD_BUILD", "build"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out")
    ap.add_argument("--work", default=tempfile.gettempdir())
    ap.add_argument("--cache", default=os.path.join(ROOT, "bench", ".cache"))
    ap.add_argument("--budget", type=float, default=200, help="seconds for all sides (each gets what is left)")
    ap.add_argument("--compile_budget", type=float, default=120, help="seconds for the torch.compile side (0: skip)")
    ap.add_argument("--sides", default="gemm,omnishard,torch_eager,torch_compile",
                    help="the sides to run, comma-separated (the device check's --quick: gemm,omnishard)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--prepare", action="store_true")
    ap.add_argument("--torch-worker", choices=["eager", "compile"])
    ap.add_argument("--model"), ap.add_argument("--data"), ap.add_argument("--shape")
    a = ap.parse_args()
    if a.torch_worker:
        return torch_worker(a)
    t_start = time.time()
    s = dict(TINY if a.tiny else SHAPE)
    os.makedirs(a.cache, exist_ok=True)
    mdir = model_dir(a.cache, s)
    make_model(mdir, s)
    data = write_samples(a.cache, "bench_device", a.batch, s, a.seq)
    if a.prepare:
        return
    a.build = os.path.join(ROOT, a.build) if not os.path.isabs(a.build) else a.build
    p_mm, flops, attn = flops_per_step(s, a.batch, a.seq)
    tokens = a.batch * a.seq
    res = dict(model=dict(s, seq=a.seq, batch=a.batch, steps=a.steps, p_mm=p_mm, flops_per_step=flops,
                          attn_flops=attn, dtype="bfloat16 mixed precision", recomputation=False),
               device=a.device)
    log(f"model {s}, seq {a.seq}, batch {a.batch}: {flops / 1e12:.3f} TFLOP per step")
    left = lambda: a.budget - (time.time() - t_start)   # noqa: E731
    # each side at most its cap (seconds), so that one that hangs leaves the others their time
    sides = [("gemm", None, 30), ("omnishard", None, 80), ("torch_eager", "eager", 70),
             ("torch_compile", "compile", a.compile_budget)]
    want = a.sides.split(",")
    bad = set(want) - {n for n, _, _ in sides}
    if bad:
        sys.exit(f"bench_device: --sides {a.sides}: unknown {sorted(bad)}; known: {[n for n, _, _ in sides]}")
    for name, kind, cap in sides:
        budget = min(left(), cap)
        if name not in want:
            res[name] = "skipped (--sides)"
            continue
        if name == "torch_compile" and a.compile_budget <= 0:
            res[name] = "skipped (--compile_budget 0)"
            continue
        if budget < 5:
            res[name] = f"skipped: {left():.0f} s of the bench's budget left"
            log(f"{name}: {res[name]}")
            continue
        a.side_budget = budget
        t0 = time.time()
        try:
            if name == "gemm":
                res[name] = side_gemm(a)
            elif name == "omnishard":
                res[name] = side_omni(a, mdir, data)
            else:
                res[name] = side_torch(a, mdir, data, s, kind, budget)
            log(f"{name}: done in {time.time() - t0:.0f} s")
        except subprocess.TimeoutExpired:
            res[name] = f"did not finish within {budget:.0f} s"
            log(f"{name}: {res[name]}")
        except Exception as e:   # noqa: BLE001 (the next side still runs; the report says why this one failed)
            res[name] = f"failed: {e}"[:3000]
            log(f"{name}: {res[name]}")
    summarize(res, flops, tokens)
    print(table(res), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    ok = all(isinstance(res.get(k), dict) for k in ("gemm", "omnishard", "torch_eager") if k in want)
    sys.exit(0 if ok else 1)


def table(res):
    rows = ["| side | s/step | tokens/s | TFLOP/s | MFU | peak device GB | losses |", "|---|---|---|---|---|---|---|"]
    g = res.get("gemm")
    for name in ("omnishard", "torch_eager", "torch_compile"):
        r = res.get(name)
        if not isinstance(r, dict):
            rows.append(f"| {name} | {r or 'not run'} | | | | | |")
            continue
        f = lambda v, fmt: "-" if v is None else format(v, fmt)   # noqa: E731
        rows.append(f"| {name} | {f(r.get('step_s'), '.4f')} | {f(r.get('tokens_per_s'), '.0f')} | "
                    f"{f(r.get('tflops'), '.1f')} | {f(r.get('mfu'), '.1%')} | {f(r.get('peak_gb'), '.2f')} | "
                    f"{' '.join(f'{x:.4f}' for x in r.get('losses', [])[:4])} |")
    head = f"GEMM ({g['shape']}): {g['tflops']:.1f} TFLOP/s on {g['device_name']}" if isinstance(g, dict) else f"GEMM: {g}"
    return head + "\n\n" + "\n".join(rows) + "\n\ntargets: " + (", ".join(
        f"{k}: {'met' if v else 'NOT met'}" for k, v in res.get("targets", {}).items()) or "none evaluated")


if __name__ == "__main__":
    main()
