"""A/B of training steps: omnishard builds and/or launch lines run alternately (A B A B ...) on issue 12's model
(bench/vs_deepspeed.py's shape, cached in bench/.cache), printing per side the median step time and phase times
(logging.jsonl time/*_s, docs/training.md) over every step but each run's first, and each side's ratio to the
first side, per round and overall (adjacent runs see about the same machine load). On a machine shared with
other jobs the wall-clock times scatter widely; the CPU seconds of each whole run (all ranks, start-up included,
from wait4's resource usage of the mpirun process tree) vary much less and are printed next to them ("run CPU s"),
with the system (kernel) part of it, the tree's minor page faults ("minflt", every rank, start-up included) and
the largest peak RSS of any of its processes ("max RSS": the peak of the rank that peaked highest), which the load
does not change; also rank 0's peak RSS (logging.jsonl peak_rss_gb) and the bytes it received by parameter
all-gathers per step (gather_bytes; "-" from a build that does not log it).

    .venv/bin/python bench/ab_step.py --side NAME=BUILD:RANKSxTHREADS[:BATCHxACCUM[:STAGE[:DTYPE]]] ... [--seq 512] [--steps 3]
        [--rounds 3] [--layers 4] [--stage 3] [--torch_dtype float32|bfloat16]

A side names a build folder (its omnishard binary), ranks x threads per rank, and optionally the per-rank batch and
gradient accumulation (default 1x1), the ZeRO stage (default --stage) and the precision (float32 or bfloat16,
default --torch_dtype). Sides with the same global batch train on the same samples in the same order;
their losses are printed for comparison. Examples:
    --side base=/tmp/base/build:2x1 --side new=build:2x1                       # a change, A/B
    --side ranks=build:2x1:1x1 --side threads=build:1x2:1x2                      # 2 ranks vs 1 rank x 2 threads
    --side fp32=build:2x1:1x1:3:float32 --side bf16=build:2x1:1x1:3:bfloat16       # precision
    --side move=build:2x1 --side stay=build:2x1 --flag stay:--head_balance=false     # an option, A/B
--flag NAME:--OPTION=VALUE adds an sft option to side NAME's runs only, --env NAME:VAR=VALUE an environment
variable (both repeatable). The table's "moved" is
the median of logging.jsonl's head_rows_moved (rows the head moved between ranks per step; "-" from a build that
does not log it).
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_step import make_model, model_dir, write_samples, LABELS  # noqa: E402
from vs_deepspeed import SHAPE  # noqa: E402

PHASES = ["time/data_s", "time/compute_s", "time/compute_max_s", "time/gather_wait_s", "time/reduce_wait_s",
          "time/optimizer_s", "time/cpu_s"]


def parse_side(text, stage, dtype):
    name, rest = text.split("=", 1)
    build, *f = rest.split(":")
    if not f or len(f) > 4 or (len(f) > 3 and f[3] not in ("float32", "bfloat16")):
        sys.exit(f"--side {text}: expected NAME=BUILD:RANKSxTHREADS[:BATCHxACCUM[:STAGE[:float32|bfloat16]]]")
    ranks, threads = map(int, f[0].split("x"))
    batch, accum = map(int, (f[1] if len(f) > 1 else "1x1").split("x"))
    return dict(name=name, build=build, ranks=ranks, threads=threads, batch=batch, accum=accum,
                stage=int(f[2]) if len(f) > 2 else stage, dtype=f[3] if len(f) > 3 else dtype)


def run(side, a, mdir, data):
    out = tempfile.mkdtemp(prefix="omni_ab_", dir="/tmp")
    env = dict(os.environ, OMP_NUM_THREADS=str(side["threads"]), OPENBLAS_NUM_THREADS=str(side["threads"]),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **side["env"])
    exe = os.path.join(ROOT, side["build"], "omnishard")
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(side["ranks"]), exe, "sft", "--model", mdir,
           "--dataset", data, "--zero_stage", str(side["stage"]), "--max_length", str(a.seq), "--max_steps", str(a.steps),
           "--learning_rate", "1e-5", "--lr_scheduler_type", "constant", "--warmup_steps", "0", "--weight_decay", "0",
           "--max_grad_norm", "1", "--gradient_checkpointing", "true", "--per_device_train_batch_size",
           str(side["batch"]), "--gradient_accumulation_steps", str(side["accum"]), "--save_only_model", "true",
           "--torch_dtype", side["dtype"], "--output_dir", out, *side["flags"]]
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)   # the tree's usage: sums, and the largest maxrss of any process in it
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read()[-3000:].decode(errors="replace")
    if p.returncode:
        sys.exit(f"{side['name']}: failed ({p.returncode}): {' '.join(cmd)}\n{tail}")
    log = [json.loads(x) for x in open(os.path.join(out, "logging.jsonl")) if '"step_time_s"' in x]
    shutil.rmtree(out, ignore_errors=True)
    return log, dict(cpu=ru.ru_utime + ru.ru_stime, sys=ru.ru_stime, minflt=ru.ru_minflt, rss_gb=ru.ru_maxrss * 1024 / 1e9)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--side", action="append", required=True, help="NAME=BUILD:RANKSxTHREADS[:BATCHxACCUM[:STAGE]]")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps per run (the first is warm-up)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", type=int, default=SHAPE["layers"])
    ap.add_argument("--stage", type=int, default=3)
    ap.add_argument("--torch_dtype", default="float32", choices=["float32", "bfloat16"], help="the sides' precision")
    ap.add_argument("--cache", default=os.path.join(ROOT, "bench", ".cache"))
    ap.add_argument("--labels", default="random", choices=LABELS,
                    help="the samples' label layout (bench/bench_step.py write_samples)")
    ap.add_argument("--env", action="append", default=[], help="NAME:VAR=VALUE, for side NAME only")
    ap.add_argument("--flag", action="append", default=[], help="NAME:--OPTION=VALUE, for side NAME only")
    a = ap.parse_args()
    sides = [parse_side(x, a.stage, a.torch_dtype) for x in a.side]
    for x in sides:
        x["env"], x["flags"] = {}, []
    for e in a.env:
        name, _, kv = e.partition(":")
        var, eq, val = kv.partition("=")
        hit = [x for x in sides if x["name"] == name]
        if not hit or not eq or not var:
            sys.exit(f"--env {e}: expected NAME:VAR=VALUE with NAME one of the sides")
        hit[0]["env"][var] = val
    for f in a.flag:
        name, _, opt = f.partition(":")
        hit = [x for x in sides if x["name"] == name]
        if not hit or not opt.startswith("--"):
            sys.exit(f"--flag {f}: expected NAME:--OPTION=VALUE with NAME one of the sides")
        hit[0]["flags"].append(opt)
    s = dict(SHAPE, layers=a.layers)
    os.makedirs(a.cache, exist_ok=True)
    mdir = model_dir(a.cache, s)
    make_model(mdir, s)
    n = max(x["ranks"] * x["batch"] * x["accum"] for x in sides) * a.steps
    data = write_samples(a.cache, "ab", n, s, a.seq, a.labels)
    print(f"seq {a.seq}, {a.layers} layers, {a.rounds} rounds x {a.steps} steps; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    res = {x["name"]: [] for x in sides}
    cpus = {x["name"]: [] for x in sides}   # CPU seconds of each whole run (every rank, start-up included)
    usage = {x["name"]: [] for x in sides}  # and its minor page faults and largest peak RSS
    for k in range(a.rounds):
        for x in sides:
            log, u = run(x, a, mdir, data)
            res[x["name"]].append(log)
            cpus[x["name"]].append(u["cpu"])
            usage[x["name"]].append(u)
            print(f"round {k + 1} {x['name']}: steps {' '.join('%.2f' % r['step_time_s'] for r in log)} s; losses "
                  f"{' '.join('%.6f' % r['loss'] for r in log)}; CPU {u['cpu']:.1f} s (system {u['sys']:.1f}); minflt {u['minflt']}; "
                  f"max RSS {u['rss_gb']:.2f} GB; load {os.getloadavg()[0]:.2f}", flush=True)
    first = sides[0]["name"]
    med = lambda logs, key: statistics.median(r.get(key, float("nan")) for log in logs for r in (log[1:] or log))
    print("| side | ranks x threads | batch x accum | stage | dtype | run CPU s | vs | system s | minflt | vs | max RSS GB | "
          "peak RSS GB | gather MB/step | moved | s/step | " + " | ".join(p[5:-2] for p in PHASES) +
          f" | vs {first} | per round |")
    print("|---" * (17 + len(PHASES)) + "|")
    um = lambda name, key: statistics.median(u[key] for u in usage[name])
    for x in sides:
        logs = res[x["name"]]
        t = med(logs, "step_time_s")
        per = [statistics.median(r["step_time_s"] for r in (l[1:] or l)) /
               statistics.median(r["step_time_s"] for r in (f[1:] or f)) for l, f in zip(logs, res[first])]
        print(f"| {x['name']} | {x['ranks']}x{x['threads']} | {x['batch']}x{x['accum']} | {x['stage']} | {x['dtype']} | "
              f"{statistics.median(cpus[x['name']]):.1f} | "
              f"{statistics.median(cpus[x['name']]) / statistics.median(cpus[first]):.2f} | "
              f"{um(x['name'], 'sys'):.1f} | {um(x['name'], 'minflt'):.0f} | {um(x['name'], 'minflt') / um(first, 'minflt'):.2f} | "
              f"{um(x['name'], 'rss_gb'):.2f} | {statistics.median(log[-1]['peak_rss_gb'] for log in logs):.2f} | "
              f"{'-' if 'gather_bytes' not in logs[0][-1] else '%.1f' % (med(logs, 'gather_bytes') / 1e6)} | "
              f"{'-' if 'head_rows_moved' not in logs[0][-1] else '%.0f' % med(logs, 'head_rows_moved')} | {t:.2f} | " +
              " | ".join(f"{med(logs, p):.2f}" for p in PHASES) +
              f" | {t / med(res[first], 'step_time_s'):.2f} | {' '.join(f'{v:.2f}' for v in per)} |")


if __name__ == "__main__":
    main()
