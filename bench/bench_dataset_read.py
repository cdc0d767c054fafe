"""Reading SLAM-Omni records during a run: a build that maps the records file against one that reads each record
with pread (after checking the file's size and modification time), on the same file.

Usage: .venv/bin/python bench/bench_dataset_read.py --a OLD/tests/test_samples_tool --b build/tests/test_samples_tool
       [--records 20000] [--repeat 5]

Each tool opens the file (scan, checks, digest: the same in both) and gets every sample once, printing it to
/dev/null; A and B alternate, --repeat rounds; the medians and B/A are printed with the CPU model. The figure is
the whole pass (open, tokenization of each record, formatting), so it bounds what the read itself adds.
"""
import argparse, json, pathlib, statistics, subprocess, sys, tempfile, time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from oracle import slam_samples_ref as sref  # noqa: E402


def cpu():
    for l in open("/proc/cpuinfo"):
        if l.startswith("model name"):
            return l.split(":", 1)[1].strip()
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the samples tool of the mapping build")
    ap.add_argument("--b", required=True, help="the samples tool of the reading build")
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        sref.make_model_dir(str(d / "model"), T=512, A=80, G=3, hidden=16, layers=1, heads=2, kv_heads=1, inter=32)
        sref.write_jsonl(d / "data.jsonl", sref.make_records(a.records, A=80, seed=4))
        times = {"a": [], "b": []}
        for _ in range(a.repeat):
            for k in ("a", "b"):
                t = time.perf_counter()
                subprocess.run([getattr(a, k), str(d / "data.jsonl"), str(d / "model"), "4096", "right"],
                               stdout=subprocess.DEVNULL, check=True)
                times[k].append(time.perf_counter() - t)
        ma, mb = statistics.median(times["a"]), statistics.median(times["b"])
        print(json.dumps({"cpu": cpu(), "records": a.records, "bytes": (d / "data.jsonl").stat().st_size,
                          "map_s": round(ma, 4), "pread_s": round(mb, 4), "pread_over_map": round(mb / ma, 4),
                          "runs": times}))


if __name__ == "__main__":
    main()
