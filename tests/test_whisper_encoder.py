"""The frozen Whisper encoder (`omnishard mel --encoder DIR`) against transformers' WhisperEncoder.

Oracle: `transformers.models.whisper.modeling_whisper.WhisperEncoder` in eval mode on tiny random configs (norms and
biases randomised so that every parameter matters), saved as a WhisperModel ("encoder.*"), a
WhisperForConditionalGeneration ("model.encoder.*") and a bare WhisperEncoder directory. HF's encoder takes exactly
2 x max_source_positions mel frames, so the inputs have that length: random log-mel-like values, and the log-mel of a
WAV padded/trimmed to 2 x max_source_positions x 160 samples (checked against openai-whisper's log_mel_spectrogram).
"""
import subprocess
import wave

import numpy as np
import pytest
import torch
import whisper
from safetensors.numpy import load_file, save_file

from conftest import BIN
from oracle import slam_omni_ref as ref
from omni_run import rel

CONFIGS = {
    # the facts doc's tiny encoder (HF's own test sizes): 60 mel frames -> 30 encoder frames
    "d16_l2_h4": dict(d_model=16, layers=2, heads=4, ffn=32, n_mels=80, max_pos=30),
    # 128 mel bins (large-v3 style), 8 heads of 4, 3 blocks
    "d32_l3_h8_m128": dict(d_model=32, layers=3, heads=8, ffn=48, n_mels=128, max_pos=20),
}


def run_encoder(tmp_path, enc_dir, *, wav=None, mel=None, check=True):
    out = tmp_path / "enc_out.safetensors"
    args = [str(BIN), "mel", "--encoder", str(enc_dir), "--out", str(out)]
    if wav is not None:
        args += ["--wav", str(wav)]
    else:
        mel_path = tmp_path / "mel_in.safetensors"
        save_file({"mel": np.ascontiguousarray(mel, dtype=np.float32)}, str(mel_path))
        args += ["--mel-in", str(mel_path)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if not check:
        return r
    assert r.returncode == 0, r.stderr
    return load_file(str(out))


def hf_encode(enc, mel):
    with torch.no_grad():
        return enc(input_features=torch.from_numpy(np.asarray(mel, np.float32))[None]).last_hidden_state[0].numpy()


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("layout", ["model", "cond", "encoder"])
def test_encoder_matches_transformers(tmp_path, name, layout):
    c = CONFIGS[name]
    enc = ref.make_encoder(tmp_path / "enc", layout=layout, **c)
    g = np.random.default_rng(7)
    mel = (g.standard_normal((c["n_mels"], 2 * c["max_pos"])) * 0.6 - 0.3).astype(np.float32)
    got = run_encoder(tmp_path, tmp_path / "enc", mel=mel)["encoder_output"]
    want = hf_encode(enc, mel)
    assert got.shape == (c["max_pos"], c["d_model"])
    assert rel(got, want) <= 1e-5, rel(got, want)


def write_wav(path, x):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())


@pytest.mark.parametrize("seconds", [0.3, 0.6, 1.1])   # shorter than, equal to, longer than the 0.6 s input
def test_wav_path_matches_whisper_and_transformers(tmp_path, seconds):
    """WAV -> pad/trim to 2*30*160 = 9600 samples -> log-mel (== openai-whisper) -> encoder (== transformers)."""
    enc = ref.make_encoder(tmp_path / "enc", layout="model", **CONFIGS["d16_l2_h4"])
    t = np.arange(int(16000 * seconds)) / 16000
    g = np.random.default_rng(1)
    write_wav(tmp_path / "a.wav", 0.4 * np.sin(2 * np.pi * 440 * t) * np.sin(2 * np.pi * 3 * t) + 0.05 * g.standard_normal(t.size))
    out = run_encoder(tmp_path, tmp_path / "enc", wav=tmp_path / "a.wav")
    x = torch.from_numpy(ref.read_wav16(tmp_path / "a.wav"))
    x = torch.nn.functional.pad(x, (0, max(0, 9600 - x.shape[0])))[:9600]
    mel = whisper.log_mel_spectrogram(x, 80).numpy()
    assert out["mel"].shape == (80, 60)
    assert np.abs(out["mel"] - mel).max() <= 1e-4
    want = hf_encode(enc, mel)
    assert rel(out["encoder_output"], want) <= 1e-5, rel(out["encoder_output"], want)


def test_encoder_directory_errors(tmp_path):
    ref.make_encoder(tmp_path / "enc", layout="model", **CONFIGS["d16_l2_h4"])
    mel = np.zeros((80, 60), np.float32)
    # a tensor with the wrong shape: named, with both shapes
    w = load_file(str(tmp_path / "enc/model.safetensors"))
    w["encoder.layers.1.fc1.weight"] = w["encoder.layers.1.fc1.weight"][:, :8].copy()
    save_file(w, str(tmp_path / "enc/model.safetensors"))
    r = run_encoder(tmp_path, tmp_path / "enc", mel=mel, check=False)
    assert r.returncode != 0 and "encoder.layers.1.fc1.weight" in r.stderr and "[32, 8]" in r.stderr, r.stderr
    # no encoder tensors at all
    save_file({"x": np.zeros(3, np.float32)}, str(tmp_path / "enc/model.safetensors"))
    r = run_encoder(tmp_path, tmp_path / "enc", mel=mel, check=False)
    assert r.returncode != 0 and "no Whisper encoder tensors" in r.stderr, r.stderr
    # more mel frames than the positions hold
    enc2 = tmp_path / "enc2"
    ref.make_encoder(enc2, layout="model", **CONFIGS["d16_l2_h4"])
    r = run_encoder(tmp_path, enc2, mel=np.zeros((80, 62), np.float32), check=False)
    assert r.returncode != 0 and "max_source_positions" in r.stderr, r.stderr
