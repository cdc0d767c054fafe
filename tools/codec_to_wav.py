#!/usr/bin/env python3
"""The spoken answer of `omnishard infer` as a WAV: its `codec` stream (CosyVoice-300M-SFT speech tokens, 0..4095)
through CosyVoice's flow-matching decoder and HiFT vocoder, as the reference does (X-LANCE/SLAM-LLM
examples/s2s/utils/codec_utils.py: setup_codec loads `CosyVoice(codec_decoder_path)` and audio_decode_cosyvoice calls
its model's token2wav with the SFT speaker embedding `spk2info['中文女']` and no prompt speech, the "default_tone").

usage: python tools/codec_to_wav.py --cosyvoice CosyVoice --model CosyVoice/pretrained_models/CosyVoice-300M-SFT \
           --input answer.json --output answer.wav [--speaker 中文女] [--speed 1.0]

--input: the JSON object `omnishard infer` prints (`codec`, see docs/inference.md "Output"), or `-` for stdin.
--cosyvoice: a clone of https://github.com/FunAudioLLM/CosyVoice (with its submodule third_party/Matcha-TTS and
its requirements installed); --model: the CosyVoice-300M-SFT model folder (ModelScope iic/CosyVoice-300M-SFT or
Hugging Face FunAudioLLM/CosyVoice-300M-SFT). The WAV is written at the model's sample rate (22050 Hz).
"""
import argparse, json, os, sys, uuid


def fail(msg):
    sys.exit(f"codec_to_wav: {msg}")


def read_codec(path):
    """the `codec` ids of an `omnishard infer` output (a list of ints in [0, 4096))"""
    try:
        o = json.load(sys.stdin if path == "-" else open(path, encoding="utf-8"))
    except (OSError, ValueError) as e:
        fail(f"{path}: cannot read the JSON output of omnishard infer: {e}")
    codec = o.get("codec") if isinstance(o, dict) else None
    if not isinstance(codec, list) or not all(isinstance(t, int) and 0 <= t < 4096 for t in codec):
        fail(f"{path}: field 'codec': expected a list of CosyVoice speech tokens (integers 0..4095), as "
             f"`omnishard infer` prints (docs/inference.md)")
    if not codec:
        fail(f"{path}: field 'codec' is empty: the answer has no audio (text_only, or cut before any audio token)")
    return codec


def load_cosyvoice(repo, model):
    for p in (os.path.join(repo, "third_party", "Matcha-TTS"), repo):
        sys.path.insert(0, p)
    try:
        from cosyvoice.cli.cosyvoice import CosyVoice
    except ImportError as e:
        fail(f"cannot import CosyVoice from --cosyvoice {repo} ({e}): clone https://github.com/FunAudioLLM/CosyVoice "
             f"with --recursive and install its requirements")
    if not os.path.isdir(model):
        fail(f"--model {model}: not a folder (download CosyVoice-300M-SFT)")
    return CosyVoice(model)


def token2wav(cv, codec, speaker, speed):
    """CosyVoice's model.token2wav on the whole stream, its per-request state set up as its own tts() does"""
    import torch
    m = cv.model
    if speaker not in cv.frontend.spk2info:
        fail(f"--speaker {speaker}: not a speaker of this model (it has {', '.join(cv.frontend.spk2info)})")
    u = str(uuid.uuid1())
    state = {"mel_overlap_dict": torch.zeros(1, 80, 0), "flow_cache_dict": torch.zeros(1, 80, 0, 2),
             "hift_cache_dict": None}
    for name, value in state.items():
        if hasattr(m, name):
            getattr(m, name)[u] = value
    with torch.no_grad():
        speech = m.token2wav(token=torch.tensor([codec], dtype=torch.int32), prompt_token=torch.zeros(1, 0, dtype=torch.int32),
                             prompt_feat=torch.zeros(1, 0, 80), embedding=cv.frontend.spk2info[speaker]["embedding"],
                             uuid=u, finalize=True, speed=speed)
    return speech.cpu()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True, help="omnishard infer's JSON output (file or -)")
    ap.add_argument("--output", required=True, help="the WAV to write")
    ap.add_argument("--cosyvoice", required=True, help="a clone of FunAudioLLM/CosyVoice")
    ap.add_argument("--model", required=True, help="the CosyVoice-300M-SFT folder")
    ap.add_argument("--speaker", default="中文女", help="SFT speaker (default 中文女, the reference's default tone)")
    ap.add_argument("--speed", type=float, default=1.0)
    a = ap.parse_args()
    codec = read_codec(a.input)
    cv = load_cosyvoice(a.cosyvoice, a.model)
    speech = token2wav(cv, codec, a.speaker, a.speed)
    import torchaudio
    rate = getattr(cv, "sample_rate", 22050)
    torchaudio.save(a.output, speech, rate)
    print(f"codec_to_wav: {a.output}: {len(codec)} tokens, {speech.shape[-1] / rate:.2f} s at {rate} Hz")


if __name__ == "__main__":
    main()
