"""Writes a tiny random SLAM-Omni model (Qwen2 + group-decode adapter, with a byte-level BPE tokenizer trained on the
fly) and a SLAM-Omni dataset of generated text-question records (docs/dataset.md) for demos.
usage: make_tiny_model.py MODEL_DIR DATA_JSONL [--samples N] [--pretokenized]"""
import argparse, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from oracle import slam_omni_ref as ref
from oracle import slam_samples_ref as sref

ap = argparse.ArgumentParser()
ap.add_argument("model_dir")
ap.add_argument("data")
ap.add_argument("--samples", type=int, default=64)
ap.add_argument("--pretokenized", action="store_true", help="random pretokenized samples instead of SLAM-Omni records")
a = ap.parse_args()
sref.make_model_dir(a.model_dir, T=512, A=80, G=3, hidden=64, layers=2, heads=4, kv_heads=2, inter=128, tied=True)
if a.pretokenized:
    ref.make_data(a.data, a.samples, G=3, T=512, A=80, min_len=16, max_len=48)
else:
    sref.write_jsonl(a.data, sref.make_records(a.samples, A=80, seed=1, learnable=True))
print(f"wrote {a.model_dir} and {a.data}")
