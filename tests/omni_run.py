"""Helpers to run the omnishard binary from tests."""
import json, os, subprocess
import numpy as np
from safetensors.numpy import load_file
from conftest import BIN, ROOT

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def run(args, np_=None, check=True, timeout=300, env=None):
    cmd = ([*MPIRUN, "-np", str(np_)] if np_ else []) + [str(BIN), *map(str, args)]
    e = dict(os.environ, OMP_NUM_THREADS="1" if np_ and np_ > 1 else os.environ.get("OMP_NUM_THREADS", "2"))
    if env:
        e.update(env)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def sft(model, data, out, steps, extra=(), np_=None, check=True):
    args = ["sft", "--model", model, "--dataset", data, "--output_dir", out, "--max_steps", steps, *extra]
    return run(args, np_=np_, check=check)


def logs(out):
    return [json.loads(l) for l in open(os.path.join(out, "logging.jsonl"))]


def weights(d):
    w = load_file(os.path.join(d, "model.safetensors"))
    p = os.path.join(d, "slam_omni.safetensors")
    if os.path.exists(p):
        w.update(load_file(p))
    return w


def rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
