"""One training step (forward + backward + grad-norm clipping + AdamW) of the same SLAM-Omni model in omnishard
and in PyTorch, same threads, same data: Qwen2.5-0.5B shapes (hidden 896, intermediate 4864, 24 layers, 14 heads,
2 kv heads, tied) with the SLAM-Omni vocabulary (T=152000 + A=4160) and the G=3 group-decode adapter, random
weights, one sample of seq 512, batch 1, no activation recomputation.

usage: .venv/bin/python bench/bench_step.py [--build build-bench] [--steps 3] [--threads 2] [--seq 512]
           [--blas env,unset] [--only omni|torch] [--layers 24] [--cache bench/.cache]
           [--torch_dtype float32,bfloat16] [--rounds 1]

--torch_dtype runs omnishard in each precision (bfloat16: docs/training.md "bf16 mixed precision"), alternating
within each of --rounds rounds, and prints the bf16 / fp32 step-time ratio next to the GEMM speedup the CPU offers
(bench/bench_gemm.c's k_linear_fwd at the MLP shapes, bf16 vs fp32, measured in the same run).

The model is written once to --cache (about 2.2 GB, git-ignored) and loaded by both. The runs go one after the
other (each holds about 9 GB of fp32 model state). Step times: omnishard's logging.jsonl step_time_s, PyTorch's
wall time around one step of tests/oracle/slam_omni_ref.py's loop; the first step is warm-up and is skipped, the
figure is the median of the others. --blas: how omnishard's OpenBLAS is set up: env = the environment as it is,
unset = without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (omnishard then picks the AVX-512 kernel itself).
Achieved GFLOP/s use  flops = 6 * P_mm * tokens + 12 * layers * B * L^2 * H * D  (P_mm: weights of every
matrix product: the decoder linears, lm_head over all T+A columns, the adapter; the second term is attention's
Q K^T and P V forward and backward counted in full, non-causal, as in the usual MFU formula), against the sgemm
rate (2048^3) each library reaches in the same run and environment.
"""
import argparse, json, os, resource, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sftrun import run_sft  # noqa: E402

SHAPE = dict(hidden=896, inter=4864, layers=24, heads=14, kv_heads=2, T=152000, A=4160, G=3, tied=True)


def model_dir(cache, s):
    return os.path.join(cache, f"qwen05b-slam-h{s['hidden']}-l{s['layers']}-T{s['T']}-A{s['A']}-G{s['G']}")


def make_model(d, s):
    """Random weights (normal 0.02, norms 1, biases 0) built on the meta device, then materialised once."""
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen2Config, Qwen2ForCausalLM
    if os.path.exists(os.path.join(d, "slam_omni.safetensors")):
        return
    t0 = time.time()
    V = s["T"] + s["A"]
    cfg = Qwen2Config(vocab_size=V, hidden_size=s["hidden"], intermediate_size=s["inter"],
                      num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                      num_key_value_heads=s["kv_heads"], tie_word_embeddings=s["tied"], rms_norm_eps=1e-6,
                      rope_theta=1000000.0, max_position_embeddings=32768, bos_token_id=151643,
                      eos_token_id=151643)
    with torch.device("meta"):
        model = Qwen2ForCausalLM(cfg)
    model.to_empty(device="cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.ndim == 1:
                p.fill_(1.0) if "norm" in n else p.zero_()
            else:
                p.normal_(0.0, 0.02, generator=g)
        model.tie_weights()
    tmp = d + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    A, G = s["A"], s["G"]
    w = torch.empty(G * A, A).normal_(0.0, 0.02, generator=g)
    save_file({"group_decode_adapter.linear.weight": w, "group_decode_adapter.linear.bias": torch.zeros(G * A)},
              os.path.join(tmp, "slam_omni.safetensors"))
    json.dump({"code_layer": G, "padded_text_vocabsize": s["T"], "padded_audio_vocabsize": A},
              open(os.path.join(tmp, "slam_omni.json"), "w"))
    os.replace(tmp, d)
    print(f"wrote {d} in {time.time() - t0:.0f} s", flush=True)


LABELS = ("random", "slam-omni")


def write_samples(cache, prefix, n, s, seq, labels="random"):
    """n pretokenized samples of exactly seq positions in cache (written once; the path is returned).
    labels "random": tests/oracle/slam_omni_ref.py's make_data (every row's labels random ids after a -100 prompt
    of random length, drawn for each row on its own: 2-48% of the positions have audio targets but no text one).
    labels "slam-omni": SLAM-Omni's layout (docs/dataset.md "Sample layout") in the proportions of its speech
    dialogues: a prompt (~8% of the positions) and the user's speech (10-25%) without targets in any row; then the
    answer, whose text (15-30% of the answer's positions: ~3.3 BPE tokens per second of speech against the codec's
    50 Hz / G = 3 groups, 16.7 per second) ends with eot and is -100 after it, while every audio row has a target on
    every answer position (the group tokens, eoa and its pad_a fill)."""
    path = os.path.join(cache, f"{prefix}_seq{seq}_n{n}_T{s['T']}_A{s['A']}"
                        + ("" if labels == "random" else "_" + labels) + ".jsonl")
    if os.path.exists(path):
        return path
    from oracle import slam_omni_ref as ref
    if labels == "random":
        ref.make_data(path, n, G=s["G"], T=s["T"], A=s["A"], min_len=seq, max_len=seq, seed=1)
        return path
    import numpy as np
    g, T, A, G = np.random.default_rng(1), s["T"], s["A"], s["G"]
    eot, pad_t, pad_a = T - 64, T - 63, A - 63   # the special ids (docs/dataset.md; audio ids raw, 0..A-1)
    with open(path + ".tmp", "w") as f:
        for _ in range(n):
            prompt = int(seq * g.uniform(0.06, 0.10))
            speech = int(seq * g.uniform(0.10, 0.25))
            answer = seq - prompt - speech
            n_text = max(1, int(answer * g.uniform(0.15, 0.30)))
            text = [int(x) for x in g.integers(0, T - 64, seq)]
            tlab = [-100] * (prompt + speech) + text[prompt + speech:prompt + speech + n_text - 1] + [eot]
            tlab += [-100] * (seq - len(tlab))
            text[prompt + speech + n_text:] = [pad_t] * (seq - prompt - speech - n_text)
            audio = [[int(x) for x in g.integers(0, max(A - 64, 1), seq)] for _ in range(G)]
            alab = [[-100] * (prompt + speech) + a[prompt + speech:] for a in audio]
            for a in audio:
                a[:prompt + speech] = [pad_a] * (prompt + speech)
            f.write(json.dumps({"input_ids": [[T + x for x in a] for a in audio] + [text],
                                "labels": alab + [tlab]}) + "\n")
    os.replace(path + ".tmp", path)
    return path


def flops_per_step(s, B, L):
    C, F, H, KH, V = s["hidden"], s["inter"], s["heads"], s["kv_heads"], s["T"] + s["A"]
    D = C // H
    per_layer = C * H * D + 2 * C * KH * D + H * D * C + 3 * C * F
    p_mm = s["layers"] * per_layer + V * C + s["G"] * s["A"] * s["A"]
    attn = 12 * s["layers"] * B * L * L * H * D
    return p_mm, 6 * p_mm * B * L + attn, attn


def blas_env(mode):
    env = dict(os.environ)
    if mode == "unset":
        env.pop("OPENBLAS_CORETYPE", None), env.pop("OPENBLAS_L2_SIZE", None)
    return env


def gemm_omni(build, mode, threads):
    """sgemm 2048^3 GFLOP/s of omnishard's OpenBLAS set-up (bench/bench_gemm.c, built here)."""
    exe = os.path.join(ROOT, build, "bench_gemm")
    src = [os.path.join(d, f) for d in ("src/core", "src/kernels") for f in sorted(os.listdir(os.path.join(ROOT, d)))
           if f.endswith(".c")]
    subprocess.run(["mpicc", "-std=c11", "-D_GNU_SOURCE", "-O3", "-march=native", "-fopenmp", "-Isrc",
                    "bench/bench_gemm.c", *src, "-o", exe, "-lopenblas", "-ldnnl", "-lm"], cwd=ROOT, check=True)
    env = blas_env(mode)
    env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = str(threads)
    out = subprocess.run([exe, "1"], env=env, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    kv = dict(x.split("=", 1) for x in out.split())
    gemm_omni.last = kv   # the bf16 linears (bench_gemm.c), for the bf16 / fp32 ratio
    return kv["core"], float(kv["sgemm_2048"])


def run_omni(build, mdir, data, steps, threads, seq, mode, dtype="float32"):
    env = blas_env(mode)
    env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = str(threads)
    cmd = [os.path.join(ROOT, build, "omnishard"), "sft", "--model", mdir, "--dataset", data,
           "--max_steps", str(steps), "--gradient_checkpointing", "false", "--max_length", str(seq),
           "--learning_rate", "1e-5", "--lr_scheduler_type", "constant", "--save_only_model", "true",
           "--torch_dtype", dtype]
    print("$ " + " ".join(f"{k}={env[k]}" for k in ("OMP_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
                          if k in env) + " " + " ".join(cmd), flush=True)
    log, wall = run_sft(cmd, env, ROOT, "bench_step_omni_")
    return dict(times=[r["step_time_s"] for r in log], losses=[r["loss"] for r in log],
                peak_rss_gb=log[-1]["peak_rss_gb"], wall_s=wall)


def torch_worker(a):
    """PyTorch side, in its own process: the loop of slam_omni_ref.train (forward_losses, backward, clipping,
    AdamW with the reference's parameter groups), timed per step; also torch's own sgemm 2048^3 rate."""
    import torch
    from safetensors.torch import load_file
    from transformers import Qwen2ForCausalLM
    from oracle import slam_omni_ref as ref
    torch.set_num_threads(a.threads)
    s = json.loads(a.shape)
    G, T, A = s["G"], s["T"], s["A"]
    x, y = torch.randn(2048, 2048), torch.randn(2048, 2048)
    best = 1e30
    for i in range(6):
        t0 = time.perf_counter()
        torch.mm(x, y)
        dt = time.perf_counter() - t0
        best = min(best, dt) if i else best
    gemm = 2 * 2048 ** 3 / best * 1e-9
    del x, y
    model = Qwen2ForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32)
    model.train()
    adapter = ref.Adapter(A, G)
    sd = load_file(os.path.join(a.model, "slam_omni.safetensors"))
    adapter.load_state_dict({k.removeprefix("group_decode_adapter."): v for k, v in sd.items()})
    params = dict(model.named_parameters())
    params.update({f"group_decode_adapter.{k}": v for k, v in adapter.named_parameters()})
    decay = [p for p in params.values() if p.ndim >= 2]
    no_decay = [p for p in params.values() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-5, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    data = ref.load_data(a.data, a.seq)
    ids, lab, mask = ref.collate(data[:1], 151643)
    w = [1.0 / (G + 1)] * (G + 1)
    times, losses = [], []
    for step in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        terms = ref.forward_losses(model, adapter, ids, lab, mask, G, T, A)
        loss = sum(wt * s_ / c for wt, (s_, c, _) in zip(w, terms) if c > 0)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
    blas = "MKL" if torch.backends.mkl.is_available() else "?"
    print(json.dumps(dict(times=times, losses=losses, peak_rss_gb=rss, gemm=gemm, torch=torch.__version__,
                          blas=f"{blas} (mkldnn {torch.backends.mkldnn.is_available()})",
                          attn=model.config._attn_implementation)))


def run_torch(mdir, data, steps, threads, seq, shape):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", "--model", mdir, "--data", data,
           "--steps", str(steps), "--threads", str(threads), "--seq", str(seq), "--shape", json.dumps(shape)]
    print(f"$ OMP_NUM_THREADS={threads} {sys.executable} bench/bench_step.py --torch-worker ...", flush=True)
    t0 = time.time()
    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"PyTorch worker failed ({p.returncode}):\n{p.stderr[-3000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["wall_s"] = time.time() - t0
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("OMNISHARD_BUILD", "build-bench"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "bench", ".cache"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--layers", type=int, default=SHAPE["layers"], help="fewer layers for a quick trial")
    ap.add_argument("--blas", default="env,unset", help="omnishard OpenBLAS set-ups to run: env, unset")
    ap.add_argument("--only", choices=["omni", "torch"])
    ap.add_argument("--torch_dtype", default="float32", help="omnishard precisions to run: float32, bfloat16")
    ap.add_argument("--rounds", type=int, default=1, help="omnishard runs per set-up, alternating")
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model"), ap.add_argument("--data"), ap.add_argument("--shape")
    a = ap.parse_args()
    if a.torch_worker:
        return torch_worker(a)
    s = dict(SHAPE, layers=a.layers)
    mdir = model_dir(a.cache, s)
    os.makedirs(a.cache, exist_ok=True)
    make_model(mdir, s)
    from oracle import slam_omni_ref as ref
    data = os.path.join(a.cache, f"one_{a.seq}.jsonl")
    if not os.path.exists(data):
        ref.make_data(data, 1, G=s["G"], T=s["T"], A=s["A"], min_len=a.seq, max_len=a.seq, seed=1)
    p_mm, flops, attn = flops_per_step(s, 1, a.seq)
    print(f"model: hidden {s['hidden']}, inter {s['inter']}, {s['layers']} layers, {s['heads']}/{s['kv_heads']} heads, "
          f"V = {s['T']} + {s['A']}, G = {s['G']}, tied; seq {a.seq}, batch 1, {a.threads} threads, "
          f"no recomputation\nflops/step = 6 * P_mm * tokens + 12 * layers * B * L^2 * H * D = "
          f"6 * {p_mm / 1e6:.1f}M * {a.seq} + {attn / 1e9:.1f}G = {flops / 1e12:.3f} TFLOP", flush=True)
    rows = []

    def med(t):
        return statistics.median(t[1:] if len(t) > 1 else t)

    dtypes = [d for d in a.torch_dtype.split(",") if d]
    if a.only != "torch":
        runs, gem = {}, {}
        for _ in range(a.rounds):   # A B A B: every set-up once per round
            for mode in [m for m in a.blas.split(",") if m]:
                core, g = gemm_omni(a.build, mode, a.threads)
                gem.setdefault(mode, []).append(dict(gemm_omni.last, sgemm=g, core=core))
                for dt in dtypes:
                    runs.setdefault((mode, dt), []).append(run_omni(a.build, mdir, data, a.steps, a.threads, a.seq, mode, dt))
        for (mode, dt), rs in runs.items():
            times = [t for r in rs for t in (r["times"][1:] if len(r["times"]) > 1 else r["times"])]
            r = dict(rs[-1], times=times, peak_rss_gb=max(x["peak_rss_gb"] for x in rs))
            g = statistics.median(x["sgemm"] for x in gem[mode])
            rows.append((f"omnishard {dt} (OpenBLAS {gem[mode][0]['core']}, {mode})", statistics.median(times), g, r))
        if "bfloat16" in dtypes and "float32" in dtypes:
            for mode in gem:
                fp, bf = statistics.median([x for r in runs[(mode, "float32")] for x in r["times"][1:]]), \
                    statistics.median([x for r in runs[(mode, "bfloat16")] for x in r["times"][1:]])
                lin = [(float(x["bf16_linear_512x896x4864"]) + float(x["bf16_linear_512x4864x896"])) /
                       (float(x["linear_512x896x4864"]) + float(x["linear_512x4864x896"])) for x in gem[mode]]
                print(f"[{mode}] bf16 / fp32 step time: {bf / fp:.3f} (speed-up {fp / bf:.2f}x); bf16 GEMM speed-up "
                      f"the CPU offers (k_linear_fwd, MLP shapes, {gem[mode][0]['bf16_path']} path): "
                      f"{statistics.median(lin):.2f}x (per round {' '.join(f'{v:.2f}' for v in lin)})")
    if a.only != "omni":
        r = run_torch(mdir, data, a.steps, a.threads, a.seq, s)   # fp32
        rows.append((f"PyTorch {r['torch']} ({r['blas']}, attn {r['attn']})", med(r["times"]), r["gemm"], r))
    print(f"\n{'run':<52} {'s/step':>7} {'GFLOP/s':>8} {'sgemm2048':>9} {'of sgemm':>8} {'peak RSS':>8}  "
          "steps (s) / losses")
    for name, t, g, r in rows:
        print(f"{name:<52} {t:7.3f} {flops / t / 1e9:8.1f} {g:9.1f} {flops / t / 1e9 / g:8.0%} "
              f"{r['peak_rss_gb']:7.2f}G  {' '.join(f'{x:.3f}' for x in r['times'])} / "
              f"{' '.join(f'{x:.5f}' for x in r['losses'])}")
    tr = [t for name, t, _, _ in rows if name.startswith("PyTorch")]
    for name, t, _, _ in rows:
        if tr and not name.startswith("PyTorch"):
            print(f"time ratio {name} / PyTorch: {t / tr[0]:.3f}  (< 1: omnishard faster)")


if __name__ == "__main__":
    main()
