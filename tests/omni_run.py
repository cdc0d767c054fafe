"""Helpers to run the omnishard binary from tests."""
import json, os, subprocess
import numpy as np
from safetensors.numpy import load_file
from conftest import BIN, ROOT

def tiny_slam(tmp_path_factory, name, samples, val_samples=0):
    """A directory with the smallest SLAM-Omni model of the run tests (hidden 16, 1 layer, G=3, T=128, A=64, random
    weights by the oracle) and `samples` pretokenized samples in data.jsonl (and val.jsonl when val_samples > 0)."""
    from oracle import slam_omni_ref as ref
    d = tmp_path_factory.mktemp(name)
    ref.make_model(str(d / "model"), hidden=16, layers=1, heads=2, kv_heads=1, inter=32, T=128, A=64, G=3)
    ref.make_data(str(d / "data.jsonl"), samples, G=3, T=128, A=64)
    if val_samples:
        ref.make_data(str(d / "val.jsonl"), val_samples, G=3, T=128, A=64, seed=9)
    return d


MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


# OMNISHARD_TEST_DEVICE=cuda (cuda:N, cpu, guard): every sft, infer and plan these helpers run gets --device with it,
# unless it names its own (tools/device-check.sh runs the oracle tests so on the GPU; with guard, conftest's BIN
# adds it to every command the tests start)
DEVICE = os.environ.get("OMNISHARD_TEST_DEVICE")


def run(args, np_=None, check=True, timeout=300, env=None, input=None, device=None):
    """omnishard args (under mpirun -np np_ when given); device: --device DEVICE after the command"""
    args = [*map(str, args)]
    if device:
        args[1:1] = ["--device", device]
    if DEVICE and args and args[0] in ("sft", "infer", "plan") and "--device" not in args:
        args[1:1] = ["--device", DEVICE]
    cmd = ([*MPIRUN, "-np", str(np_)] if np_ else []) + [str(BIN), *args]
    e = dict(os.environ, OMP_NUM_THREADS="1" if np_ and np_ > 1 else os.environ.get("OMP_NUM_THREADS", "2"))
    if env:
        e.update(env)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e, input=input)
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
