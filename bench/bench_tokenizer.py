"""Tokenizer throughput: `omnishard tokenize` against Hugging Face `tokenizers` on the same corpus.

Usage: OMNISHARD_BUILD=build .venv/bin/python bench/bench_tokenizer.py [--mb 4] [--repeat 2] [--append-doc]

The corpus is the first --mb MB of lines of Python's own standard library sources (code, comments and English
docstrings: real text that needs no download), one text per line. The tokenizer is the real Qwen2.5 one built by
tests/oracle/qwen_vocab.py. Timed: omnishard's encode time as reported by `--stats` (load and I/O excluded), and
HF's `encode_batch` of all lines, with RAYON_NUM_THREADS=1 and with its default thread count. The ids are checked
to be identical. --append-doc appends the figures to bench/NOTES.md (the measurement log; docs/performance.md summarises).
"""
import argparse, json, os, pathlib, platform, re, subprocess, sys, sysconfig, tempfile, time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import oracle.qwen_vocab as qv  # noqa: E402

HF_RUN = r"""
import json, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
lines = open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]
tok.encode_batch(lines[:200], add_special_tokens=False)   # warm-up
t = time.perf_counter()
enc = tok.encode_batch(lines, add_special_tokens=False)
dt = time.perf_counter() - t
with open(sys.argv[3], "w") as f:
    for e in enc:
        f.write(json.dumps(e.ids, separators=(",", ":")) + "\n")
print(json.dumps({"seconds": dt, "tokens": sum(len(e.ids) for e in enc)}))
"""


def corpus(mb):
    out, size = [], 0
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    for p in sorted(stdlib.rglob("*.py")):
        if "site-packages" in p.parts:
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for line in text.split("\n"):
            out.append(line)
            size += len(line.encode()) + 1
        if size >= mb * 1e6:
            break
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each encoder; the fastest counts")
    ap.add_argument("--append-doc", action="store_true")
    a = ap.parse_args()
    build = os.environ.get("OMNISHARD_BUILD", "build")
    binary = ROOT / build / "omnishard"
    tj = qv.get_tokenizer_json()
    if tj is None:
        sys.exit("bench_tokenizer: the Qwen2 vocabulary could not be fetched (pip download dashscope)")
    lines = corpus(a.mb)
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        src = d / "corpus.txt"
        src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        nbytes = src.stat().st_size
        res = {}
        best = None
        for _ in range(a.repeat):   # best of --repeat: the machine is shared
            with open(src, "rb") as fin, open(d / "os.txt", "wb") as fout:
                t = time.perf_counter()
                r = subprocess.run([str(binary), "tokenize", "--tokenizer", str(tj), "--stats"], stdin=fin,
                                   stdout=fout, stderr=subprocess.PIPE, text=True, check=True)
                wall = time.perf_counter() - t
            m = re.search(r"(\d+) tokens.*load ([\d.]+) s, encode ([\d.]+) s", r.stderr)
            if best is None or float(m.group(3)) < best[1]:
                best = (int(m.group(1)), float(m.group(3)))
            print(f"omnishard: load {float(m.group(2)):.2f} s, encode {float(m.group(3)):.3f} s, whole command "
                  f"{wall:.2f} s", file=sys.stderr)
        res["omnishard (1 thread)"] = best
        for name, env in [("HF tokenizers, RAYON_NUM_THREADS=1", {"RAYON_NUM_THREADS": "1"}),
                          (f"HF tokenizers, default threads ({os.cpu_count()} cores)", {})]:
            e = {k: v for k, v in os.environ.items() if k not in ("RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM")}
            e.update(env)
            for _ in range(a.repeat):
                out = subprocess.run([sys.executable, "-c", HF_RUN, str(tj), str(src), str(d / "hf.txt")], env=e,
                                     capture_output=True, text=True, check=True).stdout
                j = json.loads(out)
                if name not in res or j["seconds"] < res[name][1]:
                    res[name] = (j["tokens"], j["seconds"])
        same = (d / "os.txt").read_bytes() == (d / "hf.txt").read_bytes()
    base = res["omnishard (1 thread)"][1]
    rows = [f"| {k} | {n:,} | {s:.3f} | {n / s / 1e6:.2f} M | {s / base:.2f} |" for k, (n, s) in res.items()]
    cmd = f"OMNISHARD_BUILD={build} .venv/bin/python bench/bench_tokenizer.py --mb {a.mb:g} --repeat {a.repeat}"
    text = "\n".join([
        f"## Tokenizer throughput ({time.strftime('%Y-%m-%d')})", "",
        f"Command: `{cmd}`  ",
        f"Corpus: {len(lines):,} lines, {nbytes / 1e6:.1f} MB of Python {platform.python_version()} standard-library "
        f"sources; Qwen2.5 tokenizer.json; {platform.processor() or platform.machine()}, {os.cpu_count()} cores. "
        f"Ids identical: {'yes' if same else 'NO'}. Best of {a.repeat} runs each.", "",
        "| encoder | tokens | seconds | tokens/s | time vs omnishard |", "|---|---|---|---|---|", *rows, ""])
    print(text)
    if not same:
        sys.exit("bench_tokenizer: the ids differ between omnishard and HF")
    if a.append_doc:
        doc = ROOT / "bench" / "NOTES.md"
        if not doc.exists():
            doc.write_text("# Measurement log\n\n")
        with open(doc, "a") as f:
            f.write(("\n" if not doc.read_text().endswith("\n\n") else "") + text + "\n")


if __name__ == "__main__":
    main()
