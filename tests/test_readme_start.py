"""The README's "Start from a released Qwen2.5-Instruct and Whisper", on stand-ins of the same kinds: a plain
Hugging Face Qwen2 directory (fewer vocabulary rows than T + A, no SLAM-Omni tensors), a Hugging Face
WhisperForConditionalGeneration directory, SLAM-Omni records with spoken questions. The sizes are shrunk with a
slam_omni.json (T 512, A 80, projector hidden 24; the README's run uses the defaults 152000, 4160, 2048: the same
code at a larger size). plan, sft on 2 ranks at ZeRO-3 and infer --wav run as the README runs them; what the
first run adds (vocabulary rows, adapter, projector) is named on its note line, and infer prints the codec stream."""
import json, os, wave

import numpy as np

from oracle import slam_omni_ref as ref
from oracle import slam_samples_ref as sref
from omni_run import run


def test_readme_start(tmp_path):
    qwen, whisper = tmp_path / "Qwen2.5-Instruct", tmp_path / "whisper"
    sref.make_model_dir(str(qwen), T=512, A=80, G=3, hidden=32, layers=2, heads=4, kv_heads=2, inter=64, ckpt_vocab=400)
    for f in ("slam_omni.json", "slam_omni.safetensors"):
        if (qwen / f).exists():
            os.remove(qwen / f)
    assert json.load(open(qwen / "config.json"))["vocab_size"] == 400
    json.dump({"padded_text_vocabsize": 512, "padded_audio_vocabsize": 80, "projector_hidden": 24},
              open(qwen / "slam_omni.json", "w"))
    ref.make_encoder(str(whisper), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    x = 0.5 * np.sin(2 * np.pi * 440 * np.arange(8000) / 16000)
    with wave.open(str(tmp_path / "question.wav"), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes((x * 32767).astype("<i2").tobytes())
    sref.write_jsonl(tmp_path / "train.jsonl", sref.make_records(6, A=80, speech_wavs=["question.wav"]))

    plan = run(["plan", "--model", qwen, "--speech_encoder", whisper, "--nproc", 2, "--max_length", 256,
                "--device_memory", "64GB"]).stdout
    assert "speech encoder" in plan and " yes" in plan, plan
    out = tmp_path / "out"
    p = run(["sft", "--model", qwen, "--speech_encoder", whisper, "--dataset", tmp_path / "train.jsonl",
             "--output_dir", out, "--deepspeed", "zero3", "--max_length", 256, "--learning_rate", "1e-4",
             "--warmup_steps", 1, "--lr_scheduler_type", "cosine", "--save_steps", 2000, "--max_steps", 2], np_=2)
    note = next(l for l in p.stderr.splitlines() if "initialised" in l)
    for what in ("group_decode_adapter.linear.weight", "encoder_projector.linear1.weight", "rows 400-591"):
        assert what in note, note
    answer = json.loads(run(["infer", "--model", out / "final_model", "--speech_encoder", whisper,
                             "--wav", tmp_path / "question.wav", "--max_new_tokens", 8]).stdout)
    assert isinstance(answer["codec"], list) and all(0 <= t < 80 - 64 for t in answer["codec"]), answer
    # the trained model records its encoder (slam_omni.json): plan counts it without --speech_encoder
    again = run(["plan", "--model", out / "final_model", "--nproc", 2, "--max_length", 256]).stdout
    assert f"speech encoder {whisper}" in again, again
