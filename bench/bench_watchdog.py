"""Does the collective watchdog slow a training step? The same 2-rank run, A/B alternating, with this build (every
collective non-blocking and polled against --ddp_timeout) and a build from before the watchdog (blocking MPI calls),
plus this build with --ddp_timeout 0 (no deadline: the same polling loop, no clock checks that can fire).

usage: .venv/bin/python bench/bench_watchdog.py --base /tmp/base/build/omnishard [--new build/omnishard] [--rounds 6]
           [--steps 12] [--np 2] [--stages 0,3]

Build the baseline from the commit before the watchdog (6b004a2) and, to change nothing else, the new one from the
watchdog's commit (743d9b8), e.g.
    git archive 6b004a2 | tar -x -C /tmp/base && make -C /tmp/base -j2 build/omnishard
The model is a small SLAM-Omni (hidden 256, 4 layers, about 4.7 M parameters) with short samples, so a step is
dominated by its collectives (per-layer all-gathers and reduce-scatters at stage 3, bucket all-reduces at stage 0):
the case where a slower wait would show. Figure: per variant the median over rounds of the median step_time_s of
a run (the first step, warm-up, skipped), and the median over rounds of the ratio to the baseline run of the same
round (paired: the three runs of a round run back to back, so load from elsewhere affects them alike), and the
fastest step of all rounds (on a machine shared with other work, the least disturbed measurement).
"""
import argparse, os, statistics, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sftrun import run_sft  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="omnishard built from before the watchdog")
    ap.add_argument("--new", default=os.path.join(ROOT, "build", "omnishard"), help="omnishard with the watchdog")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--stages", default="0,3")
    a = ap.parse_args()
    from oracle import slam_omni_ref as ref
    d = tempfile.mkdtemp(prefix="bench-wd-", dir="/tmp")
    ref.make_model(os.path.join(d, "model"), hidden=256, layers=4, heads=4, kv_heads=2, inter=512, T=4096, A=1024,
                   G=3, tied=False, seed=1)
    ref.make_data(os.path.join(d, "data.jsonl"), 64, G=3, T=4096, A=1024, seed=2)
    new = a.new
    variants = {"before (blocking MPI)": (a.base, []), "watchdog, default 1800 s": (new, []),
                "watchdog, --ddp_timeout 0": (new, ["--ddp_timeout", "0"])}
    env = dict(os.environ, OMP_NUM_THREADS="1")
    mpi = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(a.np)]
    for stage in a.stages.split(","):
        times, best = {k: [] for k in variants}, {k: [] for k in variants}
        for r in range(a.rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))   # A/B/C then C/B/A
            for k in order:
                binary, extra = variants[k]
                cmd = [*mpi, binary, "sft", "--model", os.path.join(d, "model"), "--dataset",
                       os.path.join(d, "data.jsonl"), "--max_steps", str(a.steps), "--save_steps", "0",
                       "--max_length", "64", "--zero_stage", stage, *extra]
                log, _ = run_sft(cmd, env, ROOT, "bench-wd-run-")
                times[k].append(statistics.median(x["step_time_s"] for x in log[1:]))
                best[k] += [x["step_time_s"] for x in log[1:]]
        print(f"stage {stage}, {a.np} ranks, {a.rounds} rounds x {a.steps} steps:")
        base = times[next(iter(variants))]
        for k, v in times.items():
            ratio = statistics.median(x / b for x, b in zip(v, base))
            print(f"  {k:28s} median step {1e3 * statistics.median(v):8.2f} ms   x{ratio:.3f} of before   "
                  f"fastest step {1e3 * min(best[k]):7.2f} ms   (rounds: "
                  + " ".join(f"{1e3 * x:.1f}" for x in v) + ")", flush=True)


if __name__ == "__main__":
    main()
