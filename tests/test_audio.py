"""Audio loading through `omnishard mel --dump-audio` (the 16 kHz mono samples the front end sees).

References: analytic sines (the resampler must reproduce a band-limited signal at the new rate), exact
integer arithmetic (int16 / 32768, channel means), and the resampler's documented design (docs/audio.md)
evaluated here independently in numpy for the transition band. Files are generated in the test.
"""
import shutil
import subprocess
import wave

import numpy as np
import pytest

from conftest import BIN

EDGE = 1600  # ignore the first and last 100 ms at 16 kHz (the filter sees zeros past the ends)


def write_wav(path, samples, rate, channels=1, width=2):
    """samples: floats in [-1, 1) (width 4: 32-bit PCM, for a high-resolution input) or ints (width 2)."""
    a = np.asarray(samples)
    if width == 4:
        a = np.round(a * (2**31 - 1)).astype("<i4")
    else:
        a = a.astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(a.tobytes())


def load(path, tmp_path):
    out = tmp_path / "dump.f32"
    r = subprocess.run([str(BIN), "mel", "--wav", str(path), "--dump-audio", str(out)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    y = np.fromfile(out, "<f4").astype(np.float64)
    assert int(r.stdout) == y.size
    return y


def tone(tmp_path, rate, freq, seconds=1.0, amp=0.5):
    t = np.arange(int(rate * seconds)) / rate
    p = tmp_path / f"tone_{rate}_{freq}.wav"
    write_wav(p, amp * np.sin(2 * np.pi * freq * t), rate, width=4)
    y = load(p, tmp_path)
    assert y.size == -(-t.size * 16000 // rate)  # ceil(n * 16000 / rate)
    ref = amp * np.sin(2 * np.pi * freq * np.arange(y.size) / 16000)
    return y[EDGE:-EDGE], ref[EDGE:-EDGE]


def snr_db(y, ref):
    return 10 * np.log10(np.sum(ref**2) / np.sum((y - ref) ** 2))


def level_db(y, amp=0.5):
    return 10 * np.log10(np.mean(y**2) / (amp**2 / 2) + 1e-300)


@pytest.mark.parametrize("rate", [44100, 22050, 48000])
def test_1khz_sine_snr(tmp_path, rate):
    y, ref = tone(tmp_path, rate, 1000)
    snr = snr_db(y, ref)
    assert snr > 80, f"{rate} Hz -> 16 kHz: 1 kHz sine SNR {snr:.1f} dB"  # design: about 110 dB


@pytest.mark.parametrize("rate", [44100, 22050])
def test_passband_edge_flat(tmp_path, rate):
    y, ref = tone(tmp_path, rate, 7000)  # inside the pass-band (<= 7.2 kHz)
    gain = np.dot(y, ref) / np.dot(ref, ref)
    assert abs(20 * np.log10(gain)) < 0.01
    assert snr_db(y, ref) > 60


def design_gain_db(freq, rate, atten=90.0, pass_frac=0.9, oversample=64):
    """Frequency response of the documented resampler kernel (docs/audio.md), by numerical integration."""
    nyq = 0.5 * min(rate, 16000)
    df, fc = (1 - pass_frac) * nyq, 0.5 * (1 + pass_frac) * nyq
    beta = 0.1102 * (atten - 8.7)
    half = (atten - 8.0) / (2.285 * 2 * np.pi * df / rate) / 2
    d = np.arange(-int(half * oversample), int(half * oversample) + 1) / oversample  # input samples
    g = 2 * fc / rate
    h = g * np.sinc(g * d) * np.i0(beta * np.sqrt(np.clip(1 - (d / half) ** 2, 0, None))) / np.i0(beta)
    return 20 * np.log10(abs(np.sum(h * np.cos(2 * np.pi * freq * d / rate)) / oversample))


@pytest.mark.parametrize("rate", [44100, 22050])
def test_transition_band_7900(tmp_path, rate):
    # 7.9 kHz lies in the transition band (7.2 - 8.0 kHz): it is attenuated, by the designed amount
    y, _ = tone(tmp_path, rate, 7900)
    want = design_gain_db(7900, rate)
    assert -50 < want < -35
    assert abs(level_db(y) - want) < 1.0, f"7.9 kHz level {level_db(y):.1f} dB, design {want:.1f} dB"


@pytest.mark.parametrize("rate,freq", [(44100, 8100), (44100, 9000), (44100, 12000), (44100, 20000),
                                       (22050, 8100), (22050, 10000), (48000, 16000)])
def test_no_aliasing_above_8khz(tmp_path, rate, freq):
    y, _ = tone(tmp_path, rate, freq)
    assert level_db(y) < -80, f"{freq} Hz at {rate} Hz leaks {level_db(y):.1f} dB into the 16 kHz output"


def test_16k_int16_is_exact_and_8k_is_resampled(tmp_path):
    a = np.arange(-32768, 32768, 3, dtype=np.int64).astype(np.int16)
    p = tmp_path / "ramp16k.wav"
    write_wav(p, a, 16000)
    y = load(p, tmp_path)
    assert np.array_equal(y.astype(np.float32), a.astype(np.float32) / np.float32(32768.0))
    t = np.arange(8000) / 8000
    p8 = tmp_path / "tone8k.wav"
    write_wav(p8, np.round(16384 * np.sin(2 * np.pi * 1000 * t)), 8000)
    y = load(p8, tmp_path)
    assert y.size == 16000
    ref = 0.5 * np.sin(2 * np.pi * 1000 * np.arange(16000) / 16000)
    assert snr_db(y[EDGE:-EDGE], ref[EDGE:-EDGE]) > 60


def test_stereo_downmix(tmp_path):
    rng = np.random.default_rng(0)
    lr = rng.integers(-32768, 32768, size=(5000, 2)).astype(np.int16)
    p = tmp_path / "stereo.wav"
    write_wav(p, lr.reshape(-1), 16000, channels=2)
    y = load(p, tmp_path)
    want = (lr[:, 0].astype(np.float64) + lr[:, 1]) / 65536.0  # exact in float32 (17-bit integers / 2^16)
    assert np.array_equal(y, want)


def test_flac_equals_wav(tmp_path):
    assert shutil.which("sox"), "needs Debian's sox"
    rng = np.random.default_rng(2)
    a = np.round(rng.normal(0, 5000, 12345)).clip(-32768, 32767).astype(np.int16)
    p = tmp_path / "x.wav"
    write_wav(p, a, 16000)
    subprocess.run(["sox", str(p), str(tmp_path / "x.flac")], check=True, timeout=60)
    assert np.array_equal(load(tmp_path / "x.flac", tmp_path), a / 32768.0)


def error_files(tmp_path):
    (tmp_path / "text.wav").write_text("this is a text file, not audio\n")
    (tmp_path / "empty.wav").write_bytes(b"")
    write_wav(tmp_path / "noframes.wav", np.zeros(0, np.int16), 16000)
    return {
        "missing": (tmp_path / "missing.wav", "No such file"),
        "text": (tmp_path / "text.wav", "not a readable audio file"),
        "empty": (tmp_path / "empty.wav", "empty file"),
        "noframes": (tmp_path / "noframes.wav", "no audio samples"),
        "directory": (tmp_path, "directory"),
    }


@pytest.mark.parametrize("case", ["missing", "text", "empty", "noframes", "directory"])
@pytest.mark.parametrize("mode", ["--out", "--dump-audio"])
def test_bad_files_fail_cleanly(tmp_path, case, mode):
    path, needle = error_files(tmp_path)[case]
    r = subprocess.run([str(BIN), "mel", "--wav", str(path), mode, str(tmp_path / "o.f32")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1, (r.returncode, r.stderr)  # an error exit, not a signal
    assert str(path) in r.stderr and needle in r.stderr, r.stderr
    assert "Sanitizer" not in r.stderr and "internal error" not in r.stderr
    assert not (tmp_path / "o.f32").exists()


def test_demo_speech_tool(tmp_path):
    import pathlib
    import sys
    root = pathlib.Path(__file__).resolve().parent.parent
    qs = tmp_path / "q.txt"
    qs.write_text("# demo\nWhat is two plus two?\n\nName a colour.\n")
    out = tmp_path / "speech"
    subprocess.run([sys.executable, str(root / "tools" / "make_demo_speech.py"), "--out", str(out), "--questions",
                    str(qs)], check=True, capture_output=True, timeout=120)
    import json
    recs = [json.loads(l) for l in (out / "questions.jsonl").read_text().splitlines()]
    assert [r["source_text"] for r in recs] == ["What is two plus two?", "Name a colour."]
    for r in recs:
        with wave.open(r["source_wav"]) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
            assert 8000 < w.getnframes() < 16000 * 10
        assert load(r["source_wav"], tmp_path).size > 8000
