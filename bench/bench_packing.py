"""Training tokens/s with --packing true against unpacked (issue 22 item 4; docs/performance.md "Packing"), A/B
alternating in one run (packed, unpacked, packed, ...: adjacent runs see about the same machine load), on samples
of SLAM-Omni lengths without speech (a text question: prompt 2 + 24 system-prompt tokens, question 8-64 tokens + 3,
answer 40-320 positions: 77-415 positions, uniform parts, seeded; --question spoken: the question span has a
spoken question's 300 + 3 positions, 369-649 in all, as text stand-ins: the LLM's work is that of a spoken sample,
the encoder, the same packed or not, is left out) and a small SLAM-Omni model of random weights
(tests/oracle/slam_omni_ref.py; hidden 512, 6 layers, 4 heads / 2 kv heads, MLP 3 x hidden, T 8192, A 1024, G 3 by
default: the decoder layers dominate the step, as in Qwen2.5-0.5B, where padding costs; the head skips rows
without a target, padded or not).

    .venv/bin/python bench/bench_packing.py [--build build] [--samples 64] [--batch 4] [--max_length 1024]
        [--steps 4] [--rounds 2] [--threads 2] [--hidden 512] [--layers 6] [--question text|spoken]

Unpacked: --per_device_train_batch_size --batch (each micro-batch padded to its longest sample). Packed: rows of up
to --max_length, as many rows per micro-batch as carry about the same real tokens as an unpacked one. Both sides
run --steps steps; the figure per run is the median over its steps but the first of logging.jsonl's tokens_per_s
(real tokens, padding not counted, per second of step). Prints each side's median per round, the packed/unpacked
ratio per round and overall, the mean padding share of the unpacked micro-batches, and the CPU model (lscpu).
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sftrun import run_sft  # noqa: E402


def lengths(n, seed, spoken):
    import numpy as np
    g = np.random.default_rng(seed)
    return [int(26 + (300 if spoken else g.integers(8, 65)) + 3 + g.integers(40, 321)) for _ in range(n)]


def write_samples(path, lens, G, T, A, seed):
    """pretokenized samples: audio rows T+[0,A), text row [0,T); labels -100 over the prompt and question"""
    import numpy as np
    g = np.random.default_rng(seed)
    with open(path, "w") as f:
        for L in lens:
            ans = int(g.integers(40, 321)) if L > 120 else L // 2
            ans = min(ans, L - 1)
            ids = [[int(T + x) for x in g.integers(0, A, L)] for _ in range(G)] + [[int(x) for x in g.integers(0, T, L)]]
            lab = [[-100] * (L - ans) + [int(x) for x in g.integers(0, A, ans)] for _ in range(G)]
            lab.append([-100] * (L - ans) + [int(x) for x in g.integers(0, T, ans)])
            f.write(json.dumps({"input_ids": ids, "labels": lab}) + "\n")


def rows(lens, max_length):
    n, used = 0, 0
    for L in lens:
        if used and used + L > max_length:
            n, used = n + 1, 0
        used += L
    return n + (used > 0)


def padding_share(lens, batch):
    """the share of padding in unpacked micro-batches of consecutive samples (the epoch order is a permutation;
    the expectation is the same)"""
    pad = tot = 0
    for i in range(0, len(lens), batch):
        b = lens[i:i + batch]
        pad += max(b) * len(b) - sum(b)
        tot += max(b) * len(b)
    return pad / tot


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("OMNISHARD_BUILD", "build"))
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--max_length", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--question", choices=["text", "spoken"], default="text")
    a = ap.parse_args()
    from oracle import slam_omni_ref as ref
    G, T, A = 3, 8192, 1024
    d = tempfile.mkdtemp(prefix="bench_packing_", dir="/tmp")
    ref.make_model(os.path.join(d, "model"), hidden=a.hidden, layers=a.layers, heads=4, kv_heads=2,
                   inter=3 * a.hidden, T=T, A=A, G=G, seed=0)
    lens = lengths(a.samples, 1, a.question == "spoken")
    data = os.path.join(d, "data.jsonl")
    write_samples(data, lens, G, T, A, 2)
    mean = sum(lens) / len(lens)
    nrows = rows(lens, a.max_length)
    pbatch = max(1, round(a.batch * mean / (sum(lens) / nrows)))   # rows carrying about batch samples' tokens
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
    print(f"CPU: {model}; {a.threads} threads; {len(lens)} samples ({a.question} questions), lengths {min(lens)}-{max(lens)} (mean {mean:.0f}); "
          f"unpacked batch {a.batch} (padding {100 * padding_share(lens, a.batch):.0f}% of positions); packed "
          f"{nrows} rows of up to {a.max_length} (mean {sum(lens) / nrows:.0f} tokens), batch {pbatch}", flush=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    base = [os.path.join(ROOT, a.build, "omnishard"), "sft", "--model", os.path.join(d, "model"), "--dataset", data,
            "--max_steps", str(a.steps), "--save_strategy", "no", "--learning_rate", "1e-4",
            "--max_length", str(a.max_length)]
    sides = {"packed": ["--packing", "true", "--per_device_train_batch_size", str(pbatch)],
             "unpacked": ["--per_device_train_batch_size", str(a.batch)]}
    res = {k: [] for k in sides}
    for r in range(a.rounds):
        line = []
        for name, extra in sides.items():
            log, _ = run_sft([*base, *extra], env, ROOT, "bench_packing_run_")
            steps = [x for x in log if "tokens_per_s" in x][1:]
            tps = statistics.median(x["tokens_per_s"] for x in steps)
            res[name].append(tps)
            line.append(f"{name} {tps:.0f} tok/s")
        print(f"round {r + 1}: " + ", ".join(line) + f"; packed/unpacked {res['packed'][-1] / res['unpacked'][-1]:.2f}",
              flush=True)
    p, u = statistics.median(res["packed"]), statistics.median(res["unpacked"])
    print(f"median: packed {p:.0f} tok/s, unpacked {u:.0f} tok/s, packed/unpacked {p / u:.2f}")


if __name__ == "__main__":
    main()
