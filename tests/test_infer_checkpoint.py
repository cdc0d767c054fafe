"""omnishard infer on what a training run leaves (issue 27): a checkpoint directory is read directly (its rank files,
on any number of ranks), and slam_omni.json records the speech encoder the model was trained with, so a spoken
question needs no --speech_encoder (an explicit one wins; a recorded one that is gone is named). The reference is
omnishard's own generation from the exported model with the encoder given explicitly, whose tokens
tests/test_infer.py checks against PyTorch."""
import json, os, shutil, wave

import numpy as np
import pytest

from oracle import slam_omni_ref as ref
from oracle import slam_samples_ref as sref
from omni_run import run, sft

T, A, G = 512, 80, 3
QUESTION = "<USER>: What is the weather like in the city?"
ASK = ["--wav", "q.wav", "--question", QUESTION, "--max_new_tokens", "4"]


def infer(model, *args, np_=None, check=True):
    p = run(["infer", "--model", model, *args], np_=np_, check=check, timeout=120)
    return p if not check else json.loads(p.stdout)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """2 steps of sft with speech questions (tiny Whisper encoder, T_s = 6), a checkpoint at step 2"""
    d = tmp_path_factory.mktemp("trained")
    sref.make_model_dir(str(d / "m"), T=T, A=A, G=G, hidden=32, layers=2, heads=4, kv_heads=2, inter=64, tied=True, seed=1)
    ref.add_projector(str(d / "m"), 16, 24, 32)
    ref.make_encoder(str(d / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    x = 0.5 * np.sin(2 * np.pi * 440 * np.arange(8000) / 16000)
    with wave.open(str(d / "q.wav"), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes((x * 32767).astype("<i2").tobytes())
    recs = [{"source_wav": "q.wav", "source_text": QUESTION, "target_text": t, "target_token": [1, 2, 3, 4]}
            for t in ("Fine.", "Sunny and warm.")]
    sref.write_jsonl(d / "data.jsonl", recs)
    sft(d / "m", d / "data.jsonl", d / "out", 2, ["--speech_encoder", d / "enc", "--save_steps", "2",
                                                  "--per_device_train_batch_size", "1", "--max_length", "128"])
    return d


def ask(d, model, *extra, np_=None, check=True):
    return infer(model, *[str(d / a) if a == "q.wav" else a for a in ASK], *extra, np_=np_, check=check)


def test_the_speech_encoder_is_recorded(trained):
    d = trained
    for where in ("final_model", "checkpoint-2"):
        with open(d / "out" / where / "slam_omni.json") as f:
            assert json.load(f)["speech_encoder"] == str(d / "enc"), where   # the path as it was given


def test_spoken_question_without_speech_encoder(trained):
    d = trained
    want = ask(d, d / "out" / "final_model", "--speech_encoder", d / "enc")
    assert ask(d, d / "out" / "final_model") == want


def test_checkpoint_read_directly(trained):
    d = trained
    want = ask(d, d / "out" / "final_model", "--speech_encoder", d / "enc")
    assert ask(d, d / "out" / "checkpoint-2") == want
    # its slices re-cut for 2 ranks at ZeRO-3
    assert ask(d, d / "out" / "checkpoint-2", "--deepspeed", "zero3", np_=2) == want


def test_a_moved_encoder(trained, tmp_path):
    d = trained
    want = ask(d, d / "out" / "final_model", "--speech_encoder", d / "enc")
    model = tmp_path / "model"
    shutil.copytree(d / "out" / "final_model", model)
    cfg = json.load(open(model / "slam_omni.json"))
    cfg["speech_encoder"] = str(tmp_path / "gone")
    json.dump(cfg, open(model / "slam_omni.json", "w"))
    p = ask(d, model, check=False)
    assert p.returncode != 0 and p.stdout == ""
    assert ("%s/slam_omni.json: field 'speech_encoder': the model was trained with the speech encoder '%s', which is "
            "not there" % (model, tmp_path / "gone")) in p.stderr, p.stderr
    assert "give --speech_encoder DIR" in p.stderr
    assert ask(d, model, "--speech_encoder", d / "enc") == want   # an explicit flag wins
    # a text question needs no encoder: answered, with a note
    p = run(["infer", "--model", model, "--question", QUESTION, "--max_new_tokens", "2"], timeout=120)
    assert "the speech encoder the model was trained with ('%s'" % (tmp_path / "gone") in p.stderr, p.stderr
    assert json.loads(p.stdout)["text_ids"] is not None


def test_a_run_directory_is_named(trained):
    d = trained
    p = infer(d / "out", "--question", QUESTION, check=False)
    assert p.returncode != 0
    assert "a run directory of omnishard sft, not a model: give %s/final_model" % (d / "out") in p.stderr, p.stderr


def test_lora_checkpoint_read_directly(tmp_path):
    """a LoRA run's checkpoint (its slam_omni.json records the adapters) answers as the merged final model does"""
    d = tmp_path
    sref.make_model_dir(str(d / "m"), T=T, A=A, G=G, hidden=32, layers=2, heads=4, kv_heads=2, inter=64, seed=1)
    sref.write_jsonl(d / "data.jsonl", sref.make_records(4, A=A))
    sft(d / "m", d / "data.jsonl", d / "out", 2, ["--train_type", "lora", "--lora_rank", "4", "--save_steps", "2",
                                                  "--learning_rate", "1e-2", "--max_length", "128"])
    args = ["--question", QUESTION, "--max_new_tokens", "6"]
    merged, direct = infer(d / "out" / "final_model", *args), infer(d / "out" / "checkpoint-2", *args)
    assert (direct["text_ids"], direct["audio"]) == (merged["text_ids"], merged["audio"])


def test_relative_paths_are_stored_absolute(trained, tmp_path):
    """sft with a relative --speech_encoder and --output_dir (run from the data's folder): slam_omni.json records the
    encoder as an absolute path, so the model is read from anywhere; a relative path written by hand is read relative
    to the model directory, not to where infer runs."""
    from conftest import BIN
    import subprocess
    d = trained
    p = subprocess.run([str(BIN), "sft", "--model", "m", "--dataset", "data.jsonl", "--output_dir", "rel_out",
                        "--speech_encoder", "enc", "--max_steps", "1", "--max_length", "128"],
                       cwd=d, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    for where in ("final_model", "checkpoint-1"):
        assert json.load(open(d / "rel_out" / where / "slam_omni.json"))["speech_encoder"] == str(d / "enc"), where
    want = ask(d, d / "out" / "final_model", "--speech_encoder", d / "enc")
    model = tmp_path / "model"
    shutil.copytree(d / "out" / "final_model", model)
    shutil.copytree(d / "enc", model / "whisper")
    cfg = json.load(open(model / "slam_omni.json"))
    cfg["speech_encoder"] = "whisper"
    json.dump(cfg, open(model / "slam_omni.json", "w"))
    assert ask(d, model) == want
