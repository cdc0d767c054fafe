"""Speech front end throughput: WAV -> log-mel -> Whisper encoder, omnishard vs the PyTorch/transformers path.

omnishard: `omnishard mel --encoder DIR --wav CLIP --bench N` (libsndfile load, pad/trim, os_log_mel, the encoder
through the runtime at stage 0). PyTorch: the SLAM-LLM way, openai-whisper's `log_mel_spectrogram(pad_or_trim(x))`
and transformers' `WhisperEncoder` in eval mode under `torch.inference_mode()`, on the same clips (read with
Python's wave module: int16 / 32768, as ffmpeg decodes 16 kHz mono 16-bit files). Both sides use the same thread
count. The encoder is a random whisper-small-sized one (d 768, 12 blocks, 12 heads, ffn 3072, 1500 positions,
80 mels): speed does not depend on the values. The outputs of both sides are compared as a sanity check.

    .venv/bin/python bench/bench_speech.py [--build build] [--base OTHER_BUILD] [--clips 3] [--reps 2] [--rounds 1]
        [--threads 1 2]
"""
import argparse, os, pathlib, re, statistics, subprocess, sys, tempfile, time, wave

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent


def make_clips(d, n):
    out = []
    g = np.random.default_rng(0)
    for i in range(n):
        t = np.arange(30 * 16000) / 16000
        env = 0.5 + 0.5 * np.sin(2 * np.pi * (0.7 + 0.2 * i) * t)
        x = env * (0.3 * np.sin(2 * np.pi * (180 + 40 * i) * t) + 0.1 * np.sin(2 * np.pi * 1200 * t)) + 0.02 * g.standard_normal(t.size)
        p = d / f"clip{i}.wav"
        with wave.open(str(p), "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
            w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())
        out.append(p)
    return out


def make_encoder(d):
    import torch
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    torch.manual_seed(0)
    cfg = WhisperConfig(num_mel_bins=80, d_model=768, encoder_layers=12, encoder_attention_heads=12, encoder_ffn_dim=3072,
                        max_source_positions=1500)
    enc = WhisperEncoder(cfg).float().eval()
    enc.save_pretrained(d, safe_serialization=True)
    return enc


def torch_side(enc, clips, threads, reps):
    import torch, whisper
    torch.set_num_threads(threads)
    tm = te = ce = 0.0
    outs = []
    for c in clips:
        for r in range(reps + 1):   # the first run warms up and is not timed
            t0 = time.perf_counter()
            with wave.open(str(c), "rb") as w:
                x = torch.from_numpy(np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0)
            mel = whisper.log_mel_spectrogram(whisper.pad_or_trim(x), 80)
            t1, c1 = time.perf_counter(), time.process_time()
            with torch.inference_mode():
                y = enc(input_features=mel[None]).last_hidden_state[0]
            t2, c2 = time.perf_counter(), time.process_time()
            if r:
                tm, te, ce = tm + t1 - t0, te + t2 - t1, ce + c2 - c1
        outs.append(y.numpy())
    n = len(clips) * reps
    return tm / n, te / n, outs, ce / n


def omnishard_side(binary, enc_dir, clips, threads, reps, tmp):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    tm = te = ce = 0.0
    outs = []
    from safetensors.numpy import load_file
    for i, c in enumerate(clips):
        out = tmp / f"enc{i}.safetensors"
        r = subprocess.run([str(binary), "mel", "--encoder", str(enc_dir), "--wav", str(c), "--out", str(out),
                            "--bench", str(reps)], capture_output=True, text=True, env=env, check=True)
        m = re.search(r"log-mel ([\d.]+) ms, encoder ([\d.]+) ms per input(?: \(CPU ([\d.]+) ms\))?", r.stdout)
        tm, te = tm + float(m.group(1)) / 1e3, te + float(m.group(2)) / 1e3
        ce += float(m.group(3) or "nan") / 1e3   # builds before the CPU figure print none
        outs.append(load_file(str(out))["encoder_output"])
    return tm / len(clips), te / len(clips), outs, ce / len(clips)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("OMNISHARD_BUILD", "build"))
    ap.add_argument("--base", default=None, help="a second omnishard build to compare against (A/B, e.g. main's)")
    ap.add_argument("--clips", type=int, default=3)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds of every side (medians reported)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    a = ap.parse_args()
    builds = {"omnishard": ROOT / a.build / "omnishard"}
    if a.base:
        builds["omnishard base"] = pathlib.Path(a.base).resolve() / "omnishard"
    with tempfile.TemporaryDirectory() as td:
        tmp = pathlib.Path(td)
        clips = make_clips(tmp, a.clips)
        enc = make_encoder(tmp / "enc")
        print(f"{a.clips} clips of 30 s, whisper-small-sized random encoder, {a.reps} timed runs per clip, "
              f"{a.rounds} alternating round(s); load average {os.getloadavg()[0]:.2f}")
        print("| threads | side | load + log-mel ms | encoder ms | encoder CPU ms | total ms per 30 s clip | s of audio per s |")
        print("|---|---|---|---|---|---|---|")
        for th in a.threads:
            res = {}   # side -> [(log-mel s, encoder s, outputs) per round]
            for _ in range(a.rounds):   # A B (C) A B (C) ...: every side sees the same load on average
                for side, b in builds.items():
                    res.setdefault(side, []).append(omnishard_side(b, tmp / "enc", clips, th, a.reps, tmp))
                res.setdefault("PyTorch + transformers", []).append(torch_side(enc, clips, th, a.reps))
            med, cpu = {}, {}
            for side, rs in res.items():
                tm, te = statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)
                ce = statistics.median(r[3] for r in rs)
                med[side], cpu[side] = te, ce
                print(f"| {th} | {side} | {tm * 1e3:.0f} | {te * 1e3:.0f} | {ce * 1e3:.0f} | {(tm + te) * 1e3:.0f} | "
                      f"{30.0 / (tm + te):.1f} |")
            o, t = res["omnishard"][0][2], res["PyTorch + transformers"][0][2]
            err = max(float(np.linalg.norm(x - y) / np.linalg.norm(y)) for x, y in zip(o, t))
            pt = res["PyTorch + transformers"]
            ratios = " ".join(f"{x[1] / y[1]:.2f}" for x, y in zip(res["omnishard"], pt))
            print(f"|   | (outputs agree: max rel error {err:.1e}; encoder omnishard / PyTorch "
                  f"{med['omnishard'] / med['PyTorch + transformers']:.2f}x, per round {ratios}; in CPU time "
                  f"{cpu['omnishard'] / cpu['PyTorch + transformers']:.2f}x) | | | | | |")
            if a.base:
                ratios = " ".join(f"{x[1] / y[1]:.2f}" for x, y in zip(res["omnishard"], res["omnishard base"]))
                print(f"|   | (encoder omnishard / base {med['omnishard'] / med['omnishard base']:.2f}x, per round "
                      f"{ratios}; in CPU time {cpu['omnishard'] / cpu['omnishard base']:.2f}x) | | | | | |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
