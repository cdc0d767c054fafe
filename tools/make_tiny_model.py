"""Writes a tiny random SLAM-Omni model (Qwen2 + group-decode adapter) and a pretokenized dataset for demos.
usage: make_tiny_model.py MODEL_DIR DATA_JSONL [--samples N]"""
import argparse, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from oracle import slam_omni_ref as ref

ap = argparse.ArgumentParser()
ap.add_argument("model_dir")
ap.add_argument("data")
ap.add_argument("--samples", type=int, default=64)
a = ap.parse_args()
ref.make_model(a.model_dir, hidden=64, layers=2, heads=4, kv_heads=2, inter=128, T=192, A=80, G=3, tied=True)
ref.make_data(a.data, a.samples, G=3, T=192, A=80, min_len=16, max_len=48)
print(f"wrote {a.model_dir} and {a.data}")
