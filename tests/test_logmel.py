"""Whisper log-mel front end (`omnishard mel`) against the oracle: openai-whisper itself.

Oracle: `whisper.log_mel_spectrogram(whisper.pad_or_trim(audio), n_mels)` from the openai-whisper package
(installed with --no-deps from tests/requirements-nodeps.txt; it runs on the CPU torch of the venv), the way
SLAM-LLM calls it. openai-whisper decodes files with ffmpeg; for 16 kHz mono 16-bit files that decoding is
exactly int16 / 32768, which is what the oracle side reads here with Python's `wave` module.
Test audio is generated in the test: espeak-ng speech resampled to 16 kHz by sox, silence, a clipping square
wave, a short clip and one longer than 30 s. Nothing is committed.
"""
import hashlib
import os
import pathlib
import shutil
import subprocess
import wave

import numpy as np
import pytest
import torch
import whisper

from conftest import BIN

TOL = 1e-4  # max abs error on the final log-mel


def write_wav16(path, samples, rate=16000, channels=1):
    a = np.asarray(samples)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(a.astype("<i2").tobytes())


def read_wav16(path):
    with wave.open(str(path), "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == 16000
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0


def run_mel(tmp_path, wav, n_mels=80, extra=()):
    out = tmp_path / f"{pathlib.Path(wav).stem}.{n_mels}.f32"
    r = subprocess.run([str(BIN), "mel", "--wav", str(wav), "--out", str(out), "--n_mels", str(n_mels), *extra],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows, cols = map(int, r.stdout.split())
    return np.fromfile(out, "<f4").reshape(rows, cols)


def oracle(audio, n_mels, pad=True):
    x = torch.from_numpy(audio)
    if pad:
        x = whisper.pad_or_trim(x)
    return whisper.log_mel_spectrogram(x, n_mels).numpy()


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """A spoken question: espeak-ng (22050 Hz) -> sox -> 16 kHz mono 16-bit."""
    d = tmp_path_factory.mktemp("speech")
    assert shutil.which("espeak-ng") and shutil.which("sox"), "needs Debian's espeak-ng and sox"
    raw, wav = d / "q22.wav", d / "q16.wav"
    subprocess.run(["espeak-ng", "-w", str(raw), "What is the capital of France? Answer in one short sentence."],
                   check=True, timeout=60)
    subprocess.run(["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav)], check=True, timeout=60)
    return wav


def assert_close(ours, ref, what):
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} vs oracle {ref.shape}"
    err = float(np.abs(ours - ref).max())
    assert err <= TOL, f"{what}: max abs error {err:.3g} > {TOL}"
    return err


@pytest.mark.parametrize("n_mels", [80, 128])
def test_speech_matches_whisper(tmp_path, speech, n_mels):
    audio = read_wav16(speech)
    assert 16000 < audio.size < 480000
    ref = oracle(audio, n_mels)
    assert ref.shape == (n_mels, 3000)
    assert_close(run_mel(tmp_path, speech, n_mels), ref, f"speech {n_mels} mels")


def test_speech_unpadded_matches_whisper(tmp_path, speech):
    audio = read_wav16(speech)
    ref = oracle(audio, 80, pad=False)  # [80, n // 160]
    assert_close(run_mel(tmp_path, speech, 80, ["--no-pad"]), ref, "speech, no padding")


def test_longer_than_30s_is_trimmed(tmp_path, speech):
    audio = (read_wav16(speech) * 32768).astype(np.int16)
    long = np.concatenate([audio] * (480000 // audio.size + 2))  # > 30 s
    assert long.size > 480000
    wav = tmp_path / "long.wav"
    write_wav16(wav, long)
    ours = run_mel(tmp_path, wav)
    assert_close(ours, oracle(long.astype(np.float32) / 32768.0, 80), "speech > 30 s")


def test_silence_is_minus_1_5(tmp_path):
    wav = tmp_path / "silence.wav"
    write_wav16(wav, np.zeros(16000 * 30, np.int16))
    ours = run_mel(tmp_path, wav)
    ref = oracle(np.zeros(16000 * 30, np.float32), 80)
    assert np.all(ref == -1.5)  # the oracle's own invariant
    assert np.all(ours == -1.5)


def test_clipping_square_wave(tmp_path):
    t = np.arange(16000 * 12) / 16000
    sq = np.where(np.sin(2 * np.pi * 441 * t) >= 0, 32767, -32768).astype(np.int16)
    wav = tmp_path / "square.wav"
    write_wav16(wav, sq)
    assert_close(run_mel(tmp_path, wav), oracle(sq.astype(np.float32) / 32768.0, 80), "full-scale square wave")


def test_short_clip(tmp_path):
    rng = np.random.default_rng(1)
    t = np.arange(8000) / 16000  # 0.5 s: chirp + noise
    x = 0.3 * np.sin(2 * np.pi * (200 + 7000 * t) * t) + rng.normal(0, 0.01, t.size)
    a = np.round(x * 32767).astype(np.int16)
    wav = tmp_path / "short.wav"
    write_wav16(wav, a)
    ref_in = a.astype(np.float32) / 32768.0
    assert_close(run_mel(tmp_path, wav), oracle(ref_in, 80), "0.5 s clip, padded")
    assert_close(run_mel(tmp_path, wav, 80, ["--no-pad"]), oracle(ref_in, 80, pad=False), "0.5 s clip, unpadded")


def test_safetensors_output(tmp_path, speech):
    from safetensors.numpy import load_file
    out = tmp_path / "mel.safetensors"
    r = subprocess.run([str(BIN), "mel", "--wav", str(speech), "--out", str(out)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    t = load_file(str(out))
    assert list(t) == ["mel"] and t["mel"].dtype == np.float32 and t["mel"].shape == (80, 3000)
    assert_close(t["mel"], oracle(read_wav16(speech), 80), "safetensors output")


@pytest.mark.parametrize("n_mels,sha", [
    (80, "4f2701b1d287d74a0dc9871026e9519d98cb76426615f2539b0d151a0ae4ec2e"),
    (128, "2a5f9822897750e047c85dea37cc268d3be0ecfd23c28a5f10da129d99d05afe"),
])
def test_filters_bit_exact(tmp_path, n_mels, sha):
    out = tmp_path / "filters.f32"
    r = subprocess.run([str(BIN), "mel", "--filters", "--n_mels", str(n_mels), "--out", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(n_mels), "201"]
    data = out.read_bytes()
    assert hashlib.sha256(data).hexdigest() == sha
    # and byte-identical to the matrix openai-whisper ships (and uses in the oracle above)
    npz = os.path.join(os.path.dirname(whisper.__file__), "assets", "mel_filters.npz")
    with np.load(npz) as z:
        assert z[f"mel_{n_mels}"].astype("<f4").tobytes() == data
