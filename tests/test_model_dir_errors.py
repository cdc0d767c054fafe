"""A --model that is not a model directory (none there, no config.json, no tokenizer.json for SLAM-Omni records)
names the flag, what a model directory holds and how to get one - not a bare 'cannot open'."""
import os

from oracle import slam_samples_ref as ref
from omni_run import run

T, A = 512, 80


def check(p, model, missing):
    assert p.returncode != 0, p.stderr
    err = p.stderr
    assert f"--model '{model}': {model}/{missing}" in err, err
    assert "a model directory holds config.json, tokenizer.json" in err and "huggingface-cli download" in err, err
    assert "cannot open" not in err, err


def test_missing_model_directory_and_files_name_the_flag(tmp_path):
    ref.make_model_dir(str(tmp_path / "model"), T=T, A=A, G=3, hidden=16, layers=1, heads=2, kv_heads=1, inter=32)
    data = tmp_path / "d.jsonl"
    ref.write_jsonl(data, ref.make_records(2, A=A, seed=1))
    args = ["--dataset", data, "--output_dir", tmp_path / "o", "--max_steps", 1, "--max_length", 4096]
    check(run(["sft", "--model", tmp_path / "none", *args], check=False, timeout=120), tmp_path / "none",
          "config.json not found (no such directory)")
    os.remove(tmp_path / "model" / "tokenizer.json")
    check(run(["sft", "--model", tmp_path / "model", *args], check=False, timeout=120), tmp_path / "model",
          "tokenizer.json not found;")
    os.remove(tmp_path / "model" / "config.json")
    check(run(["sft", "--model", tmp_path / "model", *args], check=False, timeout=120), tmp_path / "model",
          "config.json not found;")


def test_a_parquet_dataset_names_omnishard_convert(tmp_path):
    """a Parquet file passed straight to --dataset (a real one, written by pyarrow) names omnishard convert"""
    import pyarrow as pa, pyarrow.parquet as pq
    ref.make_model_dir(str(tmp_path / "model"), T=T, A=A, G=3, hidden=16, layers=1, heads=2, kv_heads=1, inter=32)
    pq.write_table(pa.table({"question": ["q"], "answer": ["a"]}), tmp_path / "train.parquet")
    p = run(["sft", "--model", tmp_path / "model", "--dataset", tmp_path / "train.parquet", "--output_dir",
             tmp_path / "o", "--max_steps", 1], check=False, timeout=120)
    assert p.returncode != 0 and "train.parquet: a Parquet file" in p.stderr, p.stderr
    assert "omnishard convert" in p.stderr and "got 'P'" not in p.stderr, p.stderr
