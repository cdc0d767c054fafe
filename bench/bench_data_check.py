"""The start-up data check's cost: `omnishard sft --max_steps 1` on N SLAM-Omni text records against the same on
N/100 of them (the fixed start-up: model, tokenizer, one step), on 1 and 2 ranks, A and B alternating.

Usage: .venv/bin/python bench/bench_data_check.py [--a build/omnishard] [--b OTHER/omnishard] [--records 20000]
       [--rounds 3] [--np 1 2]

The records are VoiceAssistant-like text dialogues (a 10-40 word question, a 40-160 word answer, 10 codec tokens
per answer word); the tokenizer is the real Qwen2.5 one (tests/oracle/qwen_vocab.py; a trained BPE when it cannot be
had). Per build and rank count: the median wall time of each run and the cost per 10k records, (t_N - t_small) /
(N - N/100) * 10k, in wall time and in CPU seconds (all ranks and mpirun; less moved by the load): the open's scan, checks and digest plus the data check (every sample built once, the ranks
sharing them) plus the first step's sample reads. With --b, B/A of each figure (two builds of the same tree with and
without a change). The machine is shared: read the ratios, not the seconds.
"""
import argparse, json, os, pathlib, random, resource, shutil, statistics, subprocess, sys, tempfile, time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from oracle import slam_omni_ref as ref  # noqa: E402
from oracle import slam_samples_ref as sref  # noqa: E402

WORDS = ("the weather today is sunny and warm with a light breeze from the west so you might want to take a walk in "
         "the park or visit a museum if you prefer staying inside where it is cool quiet and calm about city time "
         "music good great question answer help people water food travel train learn").split()


def cpu():
    for l in open("/proc/cpuinfo"):
        if l.startswith("model name"):
            return l.split(":", 1)[1].strip()
    return "?"


def sentence(rng, lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))).capitalize() + "."


def records(path, n, seed=5):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(n):
            a = sentence(rng, 40, 160)
            toks = [rng.randrange(16) for _ in range(10 * len(a.split()))]
            f.write(json.dumps({"key": f"s{i}", "source_text": "<USER>: " + sentence(rng, 10, 40), "target_text": a,
                                "target_token": toks}, separators=(",", ":")) + "\n")


def model_dir(d):
    import oracle.qwen_vocab as qv
    try:
        tj = qv.get_tokenizer_json()
    except Exception:
        tj = None
    if tj:   # the real tokenizer: the text vocabulary padded as the release's (152000)
        ref.make_model(str(d), hidden=16, layers=1, heads=2, kv_heads=1, inter=32, T=152000, A=80, G=3, tied=True)
        shutil.copy(tj, d / "tokenizer.json")
        return "Qwen2.5 (real vocabulary)"
    sref.make_model_dir(str(d), T=512, A=80, G=3, hidden=16, layers=1, heads=2, kv_heads=1, inter=32)
    return "trained BPE (320 ids)"


def run(binary, d, data, np_):
    out = d / "out"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [binary, "sft", "--model", str(d / "model"), "--dataset", str(data), "--output_dir", str(out), "--max_steps",
           "1", "--max_length", "3072", "--save_steps", "100", "--save_consolidated", "false", "--torch_dtype", "float32"]
    if np_ > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(np_)] + cmd
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r0, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - t, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", default=str(ROOT / "build" / "omnishard"))
    ap.add_argument("--b")
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--np", type=int, nargs="+", default=[1, 2])
    a = ap.parse_args()
    builds = {"a": a.a, **({"b": a.b} if a.b else {})}
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        tok = model_dir(d / "model")
        small = max(1, a.records // 100)
        records(d / "big.jsonl", a.records)
        with open(d / "big.jsonl") as f, open(d / "small.jsonl", "w") as g:
            for _, l in zip(range(small), f):
                g.write(l)
        times = {}
        for _ in range(a.rounds):
            for np_ in a.np:
                for k, b in builds.items():
                    for which in ("big", "small"):
                        wall, cpu_s = run(b, d, d / f"{which}.jsonl", np_)
                        times.setdefault(f"{k}.np{np_}.{which}", []).append(wall)
                        times.setdefault(f"{k}.np{np_}.{which}.cpu", []).append(cpu_s)
        res = {"cpu": cpu(), "tokenizer": tok, "records": a.records, "bytes": (d / "big.jsonl").stat().st_size,
               "small": small}
        for np_ in a.np:
            for k in builds:
                big, sm, bc, sc = (statistics.median(times[f"{k}.np{np_}.{w}"]) for w in ("big", "small", "big.cpu", "small.cpu"))
                res[f"{k}.np{np_}"] = {"big_s": round(big, 3), "small_s": round(sm, 3),
                                       "per_10k_s": round((big - sm) / (a.records - small) * 10000, 3),
                                       "cpu_per_10k_s": round((bc - sc) / (a.records - small) * 10000, 3)}
            if a.b:
                res[f"b_over_a.np{np_}"] = {k: round(res[f"b.np{np_}"][k] / res[f"a.np{np_}"][k], 3)
                                            for k in ("per_10k_s", "cpu_per_10k_s")}
        res["runs"] = {k: [round(x, 3) for x in v] for k, v in times.items()}
        print(json.dumps(res))


if __name__ == "__main__":
    main()
