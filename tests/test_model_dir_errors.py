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


def test_a_hub_dataset_id_names_the_download_and_convert_commands(tmp_path):
    """--dataset / --val_dataset given a Hub dataset id (ms-swift's line: AI-ModelScope/VoiceAssistant-400K, also with
    #N or :subset) that is no local path: refused before anything is loaded, naming the download and convert commands
    and the --dataset to pass after; infer --dataset too. A missing local file keeps the plain error."""
    ref.make_model_dir(str(tmp_path / "model"), T=T, A=A, G=3, hidden=16, layers=1, heads=2, kv_heads=1, inter=32)
    data = tmp_path / "d.jsonl"
    ref.write_jsonl(data, ref.make_records(2, A=A, seed=1))
    m, o = tmp_path / "model", tmp_path / "o"
    for flag, spec, pass_ in [("--dataset", "AI-ModelScope/VoiceAssistant-400K", "VoiceAssistant-400K"),
                              ("--dataset", "AI-ModelScope/VoiceAssistant-400K#500", "VoiceAssistant-400K#500"),
                              ("--val_dataset", "gpt-omni/VoiceAssistant-400K:default", "VoiceAssistant-400K")]:
        args = ["--dataset", spec] if flag == "--dataset" else ["--dataset", data, "--val_dataset", spec]
        p = run(["sft", "--model", m, *args, "--output_dir", o, "--max_steps", 1], check=False, timeout=120)
        assert p.returncode != 0, p.stderr
        hub = spec.split("#")[0].split(":")[0]
        want = (f"{flag} '{spec}': no such file or folder; it reads like a dataset id of the Hugging Face Hub",
                f"`huggingface-cli download --repo-type dataset {hub} --local-dir data/{hub.split('/')[1]}`",
                f"`omnishard convert data/{hub.split('/')[1]} --output_dir {hub.split('/')[1]}`", f"then pass {flag} {pass_}")
        assert all(w in p.stderr for w in want), p.stderr
        assert not o.exists()   # stopped before the output directory was touched
    p = run(["infer", "--model", m, "--dataset", "org/speech-set", "--output_file", tmp_path / "r.jsonl"],
            check=False, timeout=120)
    assert p.returncode != 0 and "--dataset 'org/speech-set': no such file or folder; it reads like a dataset id" in p.stderr
    assert "huggingface-cli download --repo-type dataset org/speech-set" in p.stderr, p.stderr
    p = run(["sft", "--model", m, "--dataset", "data/train.jsonl", "--output_dir", o, "--max_steps", 1], check=False,
            timeout=120)
    assert p.returncode != 0 and "reads like a dataset id" not in p.stderr and "data/train.jsonl" in p.stderr, p.stderr
