"""Generation speed of `omnishard infer` with and without the KV cache (docs/inference.md "KV cache").

A random SLAM-Omni model (Qwen2 shape from the options; weights do not change the speed) answers one text question
with greedy decoding for --new steps; the runs alternate cache on / off (A/B, --rounds pairs) in the same session and
the script prints each run's steps/s (from omnishard's "generation:" line: the time of os_generate, model loading
excluded), the medians and the ratio on / off. Both sides must print the same tokens (checked).

    .venv/bin/python bench/bench_infer.py [--hidden 512] [--layers 8] [--inter 2048] [--text_vocab 8192]
        [--new 64] [--rounds 3] [--threads 2] [--ranks 1]
"""
import argparse, json, pathlib, re, statistics, subprocess, sys, tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def cpu_model():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"Model name:\s*(.*)", out)
    return m[1].strip() if m else "?"


def model_args(ap):
    """the bench model's shape options (shared with bench/bench_infer_batch.py)"""
    ap.add_argument("--build", default="build")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--inter", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv_heads", type=int, default=2)
    ap.add_argument("--text_vocab", type=int, default=8192)


def make_bench_model(d, a):
    """the random SLAM-Omni bench model of shape a (model_args) in directory d: A = 4160, G = 3 with the adapter"""
    from oracle import slam_samples_ref as sref
    sref.make_model_dir(str(d), T=a.text_vocab, A=4160, G=3, hidden=a.hidden, layers=a.layers,
                        heads=a.heads, kv_heads=a.kv_heads, inter=a.inter)


def run(binary, model, args, ranks, threads):
    cmd = [str(binary), "infer", "--model", str(model), "--question", "<USER>: What is the weather like in the city?",
           *map(str, args)]
    if ranks > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(ranks)] + cmd
    env = {"OMP_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    m = re.search(r"generation: (\d+) steps, (\d+) decoder positions, ([\d.]+) s", p.stderr)
    out = json.loads(p.stdout)
    return int(m[1]) / float(m[3]), int(m[2]), out


def main():
    ap = argparse.ArgumentParser()
    model_args(ap)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=1)
    a = ap.parse_args()
    binary = ROOT / a.build / "omnishard"
    with tempfile.TemporaryDirectory() as td:
        d = pathlib.Path(td) / "m"
        make_bench_model(d, a)
        args = ["--max_new_tokens", a.new, "--zero_stage", 3 if a.ranks > 1 else 0]
        rates = {"true": [], "false": []}
        ref = None
        for r in range(a.rounds):
            for cache in ("true", "false") if r % 2 == 0 else ("false", "true"):
                rate, pos, out = run(binary, d, args + ["--kv_cache", cache], a.ranks, a.threads)
                key = {k: v for k, v in out.items() if k != "decoder_positions"}
                if ref is None:
                    ref = key
                elif key != ref:
                    sys.exit("the KV cache changed the tokens")
                rates[cache].append(rate)
                print(f"round {r} kv_cache {cache:5}: {rate:8.2f} steps/s ({out['steps']} steps, prompt "
                      f"{out['prompt_positions']}, {pos} decoder positions)", flush=True)
        on, off = statistics.median(rates["true"]), statistics.median(rates["false"])
        print(f"CPU: {cpu_model()}; {a.threads} thread(s) x {a.ranks} rank(s); hidden {a.hidden}, {a.layers} layers, "
              f"FFN {a.inter}, V {a.text_vocab + 4160}")
        print(f"median steps/s: kv_cache on {on:.2f}, off {off:.2f}; ratio on/off {on / off:.2f}x")


if __name__ == "__main__":
    main()
