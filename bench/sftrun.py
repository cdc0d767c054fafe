"""Run an omnishard sft command line in a fresh output dir and return its logging.jsonl records (bench helper)."""
import json, os, shutil, subprocess, sys, tempfile, time


def run_sft(cmd, env, cwd, prefix):
    """cmd must end with the sft options; --output_dir is appended. Returns (log records, wall seconds)."""
    out = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    t0 = time.time()
    p = subprocess.run([*cmd, "--output_dir", out], env=env, cwd=cwd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    log = [json.loads(x) for x in open(os.path.join(out, "logging.jsonl"))]
    shutil.rmtree(out, ignore_errors=True)
    return log, time.time() - t0
