"""Step time of omnishard sft built from two trees, A/B alternating in one run: for issue 11's activation arena
(activations allocated once per run and reused by every micro-batch, against a fresh allocation per micro-batch).
A small SLAM-Omni model (G = 3 with the adapter, untied) and pretokenized samples of one length; several
micro-batches per step so that the per-micro-batch allocation shows. Prints each run's median step time (the
first step, warm-up, left out), its minor page faults and CPU seconds (user + system: less sensitive than wall
time to other load on a shared machine), and the ratios B/A of their medians over the rounds.

usage: .venv/bin/python bench/bench_acts.py --a BASE/build/omnishard [--b build/omnishard] [--rounds 3]
           [--steps 5] [--seq 512] [--accum 4] [--threads 2] [--ckpt false]
"""
import argparse, os, resource, statistics, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sftrun import run_sft  # noqa: E402
from oracle import slam_omni_ref as ref  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="baseline omnishard binary")
    ap.add_argument("--b", default=os.path.join(ROOT, "build", "omnishard"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--accum", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ckpt", default="false")
    o = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench_acts", dir="/tmp")
    T, A = 8192, 1024
    ref.make_model(os.path.join(d, "model"), hidden=512, layers=4, heads=8, kv_heads=2, inter=1408, T=T, A=A, G=3,
                   tied=False, seed=1)
    ref.make_data(os.path.join(d, "data.jsonl"), o.steps * o.accum, G=3, T=T, A=A, min_len=o.seq, max_len=o.seq, seed=2)
    env = dict(os.environ, OMP_NUM_THREADS=str(o.threads))
    opts = ["sft", "--model", os.path.join(d, "model"), "--dataset", os.path.join(d, "data.jsonl"), "--max_steps",
            str(o.steps), "--gradient_accumulation_steps", str(o.accum), "--max_length", str(o.seq),
            "--gradient_checkpointing", o.ckpt, "--save_only_model", "true", "--logging_steps", "1"]
    med, flt, cpu = {"A": [], "B": []}, {"A": [], "B": []}, {"A": [], "B": []}
    for r in range(o.rounds):
        for name, binary in (("A", o.a), ("B", o.b)):
            u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            log, _ = run_sft([binary, *opts], env, ROOT, "bench_acts_out")
            u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            times = [x["step_time_s"] for x in log if "step_time_s" in x][1:]
            med[name].append(statistics.median(times))
            flt[name].append(u1.ru_minflt - u0.ru_minflt)
            cpu[name].append(u1.ru_utime - u0.ru_utime + u1.ru_stime - u0.ru_stime)
            print(f"round {r} {name}: median step {med[name][-1]:.3f} s over {len(times)} steps, "
                  f"{flt[name][-1]} minor faults, {cpu[name][-1]:.1f} CPU s", flush=True)
    for what, v in (("step time", med), ("minor faults", flt), ("CPU seconds", cpu)):
        ratios = [b / a for a, b in zip(v["A"], v["B"])]
        print(f"B/A {what} per round: {', '.join(f'{x:.3f}' for x in ratios)}; median {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
