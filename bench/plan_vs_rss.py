"""omnishard plan's predicted per-rank memory vs the measured peak RSS of omnishard sft, ZeRO stage 3.

usage: .venv/bin/python bench/plan_vs_rss.py [--build build-bench] [--nproc 1,2,4] [--cache bench/.cache]
           [--configs A,B] [--steps 2]

Two small random SLAM-Omni models (tests/oracle/slam_omni_ref.py make_model) large enough that model state and
activations dominate the process baseline; for each N in --nproc and recomputation on and off:
  mpirun --oversubscribe --bind-to none -np N -x OMP_NUM_THREADS=1 omnishard sft ... --zero_stage 3
(one rank per core at most on this 2-core machine: the runs are slow when oversubscribed, not bigger), measured =
logging.jsonl peak_rss_gb of the last step (rank 0's VmHWM, so it includes loading), predicted = the total of
`omnishard plan --model DIR --nproc N --zero_stage 3 --max_length L --batch B` for the same recomputation setting.
"""
import argparse, json, os, re, shutil, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sftrun import run_sft  # noqa: E402

CONFIGS = {
    "A": dict(model=dict(hidden=512, layers=4, heads=8, kv_heads=2, inter=1536, T=16384, A=1024, G=3, tied=True),
              L=512, B=2),
    "B": dict(model=dict(hidden=768, layers=8, heads=12, kv_heads=4, inter=2048, T=32768, A=2048, G=3, tied=False),
              L=512, B=1),
}


def prepare(cache, name, c, nmax, steps):
    from oracle import slam_omni_ref as ref
    s = c["model"]
    d = os.path.join(cache, "plan_" + name + "_" + "_".join(f"{k}{v}" for k, v in s.items()))
    if not os.path.exists(os.path.join(d, "config.json")):
        ref.make_model(d + ".tmp", seed=0, **s)
        os.replace(d + ".tmp", d)
    n = nmax * c["B"] * steps
    data = os.path.join(d, f"data_{n}_{c['L']}.jsonl")
    if not os.path.exists(data):
        ref.make_data(data, n, G=s["G"], T=s["T"], A=s["A"], min_len=c["L"], max_len=c["L"], seed=2)
    return d, data


def plan(build, mdir, N, L, B, ckpt):
    out = subprocess.run([os.path.join(ROOT, build, "omnishard"), "plan", "--model", mdir, "--nproc", str(N),
                          "--zero_stage", "3", "--max_length", str(L), "--batch", str(B),
                          "--gradient_checkpointing", "true" if ckpt else "false"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0] == "3" and f[1] in ("yes", "no"):
            return dict(zip(["params", "grads", "optim", "buffers", "activations", "total"], map(float, f[2:8])))
    sys.exit("no stage-3 line in omnishard plan's output:\n" + out)


def measure(build, mdir, data, N, L, B, ckpt, steps):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(N), "-x", "OMP_NUM_THREADS=1",
           os.path.join(ROOT, build, "omnishard"), "sft", "--model", mdir, "--dataset", data,
           "--zero_stage", "3", "--max_steps", str(steps), "--max_length", str(L),
           "--per_device_train_batch_size", str(B), "--gradient_checkpointing", "true" if ckpt else "false",
           "--save_only_model", "true"]
    log, wall = run_sft(cmd, env, ROOT, "plan_rss_")
    return log[-1]["peak_rss_gb"], log[-1]["model_state_bytes"] / 1e9, wall, " ".join(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("OMNISHARD_BUILD", "build-bench"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "bench", ".cache"))
    ap.add_argument("--nproc", default="1,2,4")
    ap.add_argument("--configs", default="A,B")
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args()
    ns = [int(x) for x in a.nproc.split(",")]
    os.makedirs(a.cache, exist_ok=True)
    rows, bad = [], 0
    for name in a.configs.split(","):
        c = CONFIGS[name]
        mdir, data = prepare(a.cache, name, c, max(ns), a.steps)
        s = c["model"]
        print(f"config {name}: hidden {s['hidden']}, {s['layers']} layers, {s['heads']}/{s['kv_heads']} heads, inter "
              f"{s['inter']}, V = {s['T']} + {s['A']}, G = {s['G']}, {'tied' if s['tied'] else 'untied'}; "
              f"seq {c['L']}, batch {c['B']}; model {mdir}", flush=True)
        for ckpt in (True, False):
            prev = None
            for N in ns:
                p = plan(a.build, mdir, N, c["L"], c["B"], ckpt)
                rss, state, secs, cmd = measure(a.build, mdir, data, N, c["L"], c["B"], ckpt, a.steps)
                r = rss / p["total"]
                dec = "" if prev is None else ("ok" if rss < prev else "NOT LOWER")
                prev = rss
                bad += abs(r - 1) > 0.10 or dec == "NOT LOWER"
                rows.append((name, N, ckpt, p, rss, state, r, dec, secs))
                print(f"  N={N} recompute={'yes' if ckpt else 'no ':3}  plan {p['total']:.3f} GB "
                      f"(state {p['params'] + p['grads'] + p['optim']:.3f}, buffers {p['buffers']:.3f}, "
                      f"activations {p['activations']:.3f})  measured {rss:.3f} GB  ratio {r:.3f}  {dec}  "
                      f"[{secs:.0f} s]", flush=True)
    print(f"\n{'config':<6} {'N':>2} {'recompute':>9} {'plan GB':>8} {'peak RSS GB':>11} {'RSS/plan':>8}  lower with N")
    for name, N, ckpt, p, rss, state, r, dec, _ in rows:
        print(f"{name:<6} {N:>2} {'yes' if ckpt else 'no':>9} {p['total']:8.3f} {rss:11.3f} {r:8.3f}  {dec}")
    print(f"{'all within 10% and decreasing with N' if not bad else f'{bad} row(s) off by more than 10% or not lower'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
