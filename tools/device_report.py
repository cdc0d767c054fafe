"""tools/device-check.sh's report: its work folder's results (stages.tsv: one line per stage; ops.jsonl from
op_compare; oracle.xml from pytest; bench.json from bench/bench_device.py) into OUT/results.json (everything) and
OUT/report.md (the tables docs/performance.md "Device check" quotes); a short summary on stdout.
Exit status 0 when every stage that ran passed.

usage: python3 tools/device_report.py --work DIR --out DIR [--dry 0|1] [--seconds S]
"""
import argparse, json, os, re, sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))


def read_stages(work):
    out = []
    for line in open(os.path.join(work, "stages.tsv")):
        if line.strip():
            name, status, secs, note = (line.rstrip("\n").split("\t") + [""] * 4)[:4]
            out.append(dict(stage=name, status=status, seconds=int(secs or 0), note=note))
    return out


def read_ops(work):
    p = os.path.join(work, "ops.jsonl")
    return [json.loads(x) for x in open(p) if x.strip()] if os.path.exists(p) else []


def read_oracle(work, out):
    p = os.path.join(work, "oracle.xml")
    if not os.path.exists(p):   # pytest stopped at the stage's budget: the lines its -v wrote for the tests that ended
        log = os.path.join(out, "oracle.log")
        found = re.findall(r"(tests/\S+::\S+) (PASSED|FAILED|ERROR)|(PASSED|FAILED|ERROR) (tests/\S+::\S+)",
                           open(log).read()) if os.path.exists(log) else []
        return [dict(test=a or d, status={"PASSED": "PASS"}.get(b or c, b or c), seconds=0.0,
                     message="(from oracle.log: the stage stopped before pytest's report)") for a, b, c, d in found]
    tests = []
    for tc in ET.parse(p).getroot().iter("testcase"):
        bad = next((c for c in tc if c.tag in ("failure", "error", "skipped")), None)
        status = "PASS" if bad is None else {"failure": "FAIL", "error": "ERROR", "skipped": "SKIPPED"}[bad.tag]
        msg = "" if bad is None else (bad.get("message") or "")[:300]
        tests.append(dict(test=f"{tc.get('classname')}::{tc.get('name')}", status=status,
                          seconds=float(tc.get("time") or 0), message=msg))
    return tests


def read_bench(work):
    p = os.path.join(work, "bench.json")
    return json.load(open(p)) if os.path.exists(p) else None


def markdown(res):
    L = [f"# Device check report ({'dry run, no GPU' if res['dry_run'] else 'GPU'})", "",
         f"{res['seconds']} s in all. Stages:", "", "| stage | result | seconds | note |", "|---|---|---|---|"]
    L += [f"| {s['stage']} | {s['status']} | {s['seconds']} | {s['note'].replace('|', '/')} |" for s in res["stages"]]
    ops = res["ops"]
    if ops:
        fails = [o for o in ops if not o["pass"]]
        L += ["", f"## ops: {len(ops) - len(fails)} of {len(ops)} checks passed", "",
              "Worst error per op (rel = ||got - want|| / ||want||; tolerances in tests/device/op_compare.c):", "",
              "| op | dtype | checks | worst rel | worst max_abs | tol | result |", "|---|---|---|---|---|---|---|"]
        by = {}
        for o in ops:
            by.setdefault((o["op"], o["dtype"]), []).append(o)
        for (op, dt), xs in by.items():
            w = max(xs, key=lambda o: o["rel"] if o["rel"] >= 0 else 1e300)
            ok = all(o["pass"] for o in xs)
            L.append(f"| {op} | {dt} | {len(xs)} | {w['rel']:.2e} | {w['max_abs']:.2e} | {w['tol']:.0e} | "
                     f"{'PASS' if ok else 'FAIL'} |")
        if fails:
            L += ["", "Failed checks:", ""] + [f"- {o['op']} {o['dtype']} {o['shape']}: rel {o['rel']:.2e}, "
                                               f"max_abs {o['max_abs']:.2e} {o['note']}" for o in fails]
    if res["oracle"]:
        ok = sum(t["status"] == "PASS" for t in res["oracle"])
        L += ["", f"## oracle: {ok} of {len(res['oracle'])} tests passed", "", "| test | result | s |", "|---|---|---|"]
        L += [f"| {t['test']} | {t['status']} {t['message'][:120].replace('|', '/')} | {t['seconds']:.1f} |"
              for t in res["oracle"]]
    b = res["bench"]
    if b:
        from bench_device import table
        m = b["model"]
        L += ["", "## bench", "", f"hidden {m['hidden']}, {m['layers']} layers, {m['heads']}/{m['kv_heads']} heads, "
              f"V {m['T']} + {m['A']}, G {m['G']}, seq {m['seq']}, batch {m['batch']}, {m['dtype']}, "
              f"{m['flops_per_step'] / 1e12:.3f} TFLOP per step (bench/bench_device.py)", "", table(b)]
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dry", default="0")
    ap.add_argument("--seconds", type=int, default=0)
    a = ap.parse_args()
    def part(read, empty):   # a part that cannot be read is reported as such, the others still are
        try:
            return read(a.work)
        except Exception as e:   # noqa: BLE001
            print(f"device_report: {read.__name__}: {e}", file=sys.stderr)
            return empty
    res = dict(dry_run=a.dry == "1", seconds=a.seconds, stages=part(read_stages, []), ops=part(read_ops, []),
               oracle=part(lambda w: read_oracle(w, a.out), []), bench=part(read_bench, None))
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    md = markdown(res)
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(md)
    print("\n== device check: " + ", ".join(f"{s['stage']} {s['status']} ({s['seconds']} s)" for s in res["stages"]))
    if res["bench"]:
        print(md[md.index("## bench"):])
    bad = [s for s in res["stages"] if s["status"] != "PASS"]
    for s in bad:
        print(f"{s['stage']}: {s['status']} {s['note']}")
    print(f"report: {os.path.join(a.out, 'report.md')}, {os.path.join(a.out, 'results.json')}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
