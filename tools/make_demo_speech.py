#!/usr/bin/env python3
"""Speak the demo dataset's questions with espeak-ng: 16 kHz mono 16-bit WAV files plus a manifest.

usage: tools/make_demo_speech.py --out DIR [--questions FILE] [--voice en-us] [--speed 160]

FILE has one question per line (blank lines and lines starting with '#' are skipped); without it a small
built-in list is used. Writes DIR/q0000.wav, DIR/q0001.wav, ... and DIR/questions.jsonl with one record per
question: {"key", "source_wav", "source_text"} (the SLAM-Omni field names; the demo dataset adds the answers).
espeak-ng writes 22050 Hz; sox converts to 16 kHz without dither, so the files are reproducible.
Needs Debian's espeak-ng and sox. Nothing here is committed audio: run it when the demo needs the files.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

DEFAULT_QUESTIONS = [
    "What is the capital of France?",
    "How many legs does a spider have?",
    "Can you tell me a short joke?",
    "What is two plus three?",
    "Why is the sky blue?",
    "What color is a ripe banana?",
    "Name a planet in our solar system.",
    "How do I say hello in Spanish?",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--questions", help="text file, one question per line")
    ap.add_argument("--voice", default="en-us", help="espeak-ng voice (default en-us)")
    ap.add_argument("--speed", type=int, default=160, help="words per minute (default 160)")
    a = ap.parse_args()
    for tool in ("espeak-ng", "sox"):
        if not shutil.which(tool):
            sys.exit(f"make_demo_speech: {tool} not found (apt-get install espeak-ng sox)")
    if a.questions:
        with open(a.questions, encoding="utf-8") as f:
            questions = [q.strip() for q in f if q.strip() and not q.lstrip().startswith("#")]
    else:
        questions = DEFAULT_QUESTIONS
    if not questions:
        sys.exit(f"make_demo_speech: {a.questions}: no questions")
    os.makedirs(a.out, exist_ok=True)
    manifest = os.path.join(a.out, "questions.jsonl")
    with tempfile.TemporaryDirectory() as tmp, open(manifest, "w", encoding="utf-8") as m:
        for i, q in enumerate(questions):
            key = f"q{i:04d}"
            raw, wav = os.path.join(tmp, key + ".wav"), os.path.join(a.out, key + ".wav")
            subprocess.run(["espeak-ng", "-v", a.voice, "-s", str(a.speed), "-w", raw, q], check=True)
            subprocess.run(["sox", "-D", raw, "-r", "16000", "-c", "1", "-b", "16", wav], check=True)
            m.write(json.dumps({"key": key, "source_wav": os.path.abspath(wav), "source_text": q}) + "\n")
    print(f"{len(questions)} spoken questions in {a.out} ({manifest})")


if __name__ == "__main__":
    main()
