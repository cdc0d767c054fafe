"""End to end: a tiny SLAM-Omni model (random Qwen2 + adapter, a byte-level BPE trained here) fine-tuned for a few
epochs on generated SLAM-Omni records (text questions): the loss falls, logging.jsonl holds the steps and the
evaluations, `omnishard plot` draws them, checkpoints appear at --save_steps; the evaluation loss equals PyTorch's
on the exported model, does not disturb training, and does not depend on the number of ranks."""
import json, os, re
import xml.etree.ElementTree as ET

import pytest
import torch
from safetensors.torch import load_file
from transformers import Qwen2ForCausalLM

from oracle import slam_omni_ref as oref
from oracle import slam_samples_ref as ref
from omni_run import run, sft, logs, weights

T, A, G = 512, 80, 3
TRAIN = ["--learning_rate", "3e-3", "--per_device_train_batch_size", 4, "--num_train_epochs", 4, "--max_length", 512,
         "--lr_scheduler_type", "constant", "--warmup_steps", 0, "--logging_steps", 1, "--seed", 3]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("e2e")
    ref.make_model_dir(str(d / "model"), T=T, A=A, G=G, hidden=32, layers=2, heads=4, kv_heads=2, inter=64)
    ref.write_jsonl(d / "train.jsonl", ref.make_records(24, A=A, seed=1, learnable=True))
    ref.write_jsonl(d / "val.jsonl", ref.make_records(6, A=A, seed=7, learnable=True))
    return d


def train(d, name, extra=(), np_=None):
    out = d / name
    args = ["sft", "--model", d / "model", "--dataset", d / "train.jsonl", "--output_dir", out, *TRAIN, *extra]
    p = run(args, np_=np_)
    return out, p


def steps(out):
    return [l for l in logs(out) if "loss" in l]


def evals(out):
    return [l for l in logs(out) if "eval_loss" in l]


def test_training_run(setup):
    out, p = train(setup, "run", ["--val_dataset", setup / "val.jsonl", "--eval_steps", 6, "--save_steps", 8])
    st = steps(out)
    assert [l["step"] for l in st] == list(range(1, 25))                    # 24 samples / 4 = 6 steps x 4 epochs
    first, last = sum(l["loss"] for l in st[:3]) / 3, sum(l["loss"] for l in st[-3:]) / 3
    assert last < 0.8 * first, (first, last)
    for l in st:
        assert {"text_loss", "audio_loss_0", "audio_loss_1", "audio_loss_2", "lr", "grad_norm"} <= set(l)
    ev = evals(out)
    assert [l["step"] for l in ev] == [6, 12, 18, 24]
    assert all(l["eval_samples"] == 6 for l in ev)
    assert ev[-1]["eval_loss"] < ev[0]["eval_loss"]
    assert "eval at step 6/24" in p.stderr
    # checkpoints at save_steps (and the last step)
    for s in (8, 16, 24):
        assert (out / f"checkpoint-{s}" / "manifest.json").exists(), os.listdir(out)
    assert (out / "final_model" / "model.safetensors").exists()
    # the plot
    svg = out / "loss.svg"
    r = run(["plot", out / "logging.jsonl"])
    assert svg.exists(), r.stderr
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    lines = {pl.find(ns + "title").text: pl.get("points") for pl in root.iter(ns + "polyline")}
    assert {"loss", "text_loss", "audio_loss_0", "audio_loss_1", "audio_loss_2", "eval_loss"} <= set(lines)
    pts = [tuple(map(float, p.split(","))) for p in lines["loss"].split()]
    assert len(pts) == 24 and pts[-1][1] > pts[0][1]       # SVG y grows downwards: the loss fell
    assert all(70 <= x <= 700 and 40 <= y <= 470 for x, y in pts)
    assert len(lines["eval_loss"].split()) == 4


def test_eval_matches_pytorch_and_leaves_training_alone(setup):
    out, _ = train(setup, "with_eval", ["--val_dataset", setup / "val.jsonl", "--eval_steps", 5, "--save_steps", 0])
    plain, _ = train(setup, "no_eval", ["--save_steps", 0])
    # training is bit-identical with and without evaluations
    a, b = steps(out), steps(plain)
    assert [l["loss"] for l in a] == [l["loss"] for l in b]
    assert [l["grad_norm"] for l in a] == [l["grad_norm"] for l in b]
    wa, wb = weights(out / "final_model"), weights(plain / "final_model")
    assert all(torch.equal(torch.as_tensor(wa[k]), torch.as_tensor(wb[k])) for k in wa)
    # the last evaluation (after step 24) on the exported model, in PyTorch, with the same micro-batches
    model = Qwen2ForCausalLM.from_pretrained(out / "final_model").float().eval()
    adapter = oref.Adapter(A, G)
    sd = load_file(str(out / "final_model" / "slam_omni.safetensors"))
    adapter.load_state_dict({k.split("group_decode_adapter.")[1]: v for k, v in sd.items() if "group_decode_adapter" in k})
    samples, _ = ref.load(str(setup / "val.jsonl"), str(setup / "model" / "tokenizer.json"), T, A, G, 512)
    sums = [[0.0, 0] for _ in range(G + 1)]
    with torch.no_grad():
        for i in range(0, len(samples), 4):
            b = ref.collate(samples[i:i + 4], 0, G)
            terms = oref.forward_losses(model, adapter, torch.tensor(b["ids"]), torch.tensor(b["labels"]),
                                        torch.tensor(b["keymask"]), G, T, A)
            for acc, (s, c, _) in zip(sums, terms):
                acc[0] += float(s)
                acc[1] += c
    ev = evals(out)[-1]
    assert ev["step"] == 24
    want = {"eval_text_loss": sums[0][0] / sums[0][1]}
    want.update({f"eval_audio_loss_{i}": sums[1 + i][0] / sums[1 + i][1] for i in range(G)})
    want["eval_loss"] = sum(v for v in want.values()) / (G + 1)
    for k, v in want.items():
        assert abs(ev[k] - v) <= 1e-4 * abs(v), (k, ev[k], v)


def test_split_dataset_ratio(setup):
    out, p = train(setup, "split", ["--split_dataset_ratio", 0.25, "--eval_steps", 2, "--max_steps", 4, "--save_steps", 0])
    assert "6 of 24 samples held out" in p.stderr
    assert re.search(r"sft: 18 samples", p.stderr), p.stderr
    ev = evals(out)
    assert [l["step"] for l in ev] == [2, 4] and all(l["eval_samples"] == 6 for l in ev)


def test_eval_same_on_two_ranks_zero3(setup):
    extra = ["--val_dataset", setup / "val.jsonl", "--eval_steps", 3, "--max_steps", 3, "--save_steps", 0]
    # the same optimizer steps: 1 rank x 2 micro-batches of 2 = 2 ranks x 1 micro-batch of 2
    one, _ = train(setup, "r1", [*extra, "--per_device_train_batch_size", 2, "--gradient_accumulation_steps", 2])
    two, _ = train(setup, "r2", [*extra, "--deepspeed", "zero3", "--per_device_train_batch_size", 2], np_=2)
    e1, e2 = evals(one)[-1], evals(two)[-1]
    for k in ("eval_loss", "eval_text_loss", "eval_audio_loss_0", "eval_audio_loss_2"):
        assert abs(e1[k] - e2[k]) <= 1e-5 * abs(e1[k]), (k, e1[k], e2[k])
    assert e2["eval_samples"] == 6


def test_plot_errors_name_the_line(tmp_path):
    log = tmp_path / "logging.jsonl"
    log.write_text('{"step": 1, "loss": 2.0}\nnot json\n')
    p = run(["plot", log], check=False)
    assert p.returncode == 1 and "logging.jsonl:2: expected a JSON object" in p.stderr, p.stderr
    log.write_text('{"step": 1, "lr": 0.1}\n')
    p = run(["plot", log], check=False)
    assert p.returncode == 1 and "no loss values" in p.stderr, p.stderr


def test_spoken_questions(tmp_path):
    """Half of the questions are WAVs (the tiny Whisper encoder of tests/test_speech_train.py: T_s = 6 positions,
    2 ranks at ZeRO-3): the speech spans come from the records, the loss falls, the evaluation runs on them too."""
    import wave
    import numpy as np
    ref.make_model_dir(str(tmp_path / "model"), T=T, A=A, G=G, hidden=32, layers=2, heads=4, kv_heads=2, inter=64)
    oref.add_projector(str(tmp_path / "model"), 16, 24, 32)
    oref.make_encoder(str(tmp_path / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    wavs = []
    for i, f in enumerate((300, 500, 700)):
        t = np.arange(int(16000 * 0.4)) / 16000
        with wave.open(str(tmp_path / f"q{i}.wav"), "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
            w.writeframes((0.5 * np.sin(2 * np.pi * f * t) * 32767).astype("<i2").tobytes())
        wavs.append(f"q{i}.wav")
    recs = ref.make_records(16, A=A, seed=4, learnable=True, speech_wavs=wavs)
    assert sum("source_wav" in r for r in recs) == 8
    ref.write_jsonl(tmp_path / "train.jsonl", recs)
    out = tmp_path / "out"
    p = run(["sft", "--model", tmp_path / "model", "--dataset", tmp_path / "train.jsonl", "--output_dir", out, *TRAIN,
             "--speech_encoder", tmp_path / "enc", "--deepspeed", "zero3", "--per_device_train_batch_size", 2,
             "--split_dataset_ratio", 0.25, "--eval_steps", 3, "--save_steps", 0], np_=2)
    st, ev = steps(out), evals(out)
    assert len(st) == 12 and len(ev) == 4, p.stderr
    assert sum(l["loss"] for l in st[-3:]) < 0.9 * sum(l["loss"] for l in st[:3])
    assert ev[-1]["eval_loss"] < ev[0]["eval_loss"]
