"""The start-up data check (docs/dataset.md "The start-up data check"): before the model loads, every training
sample is built once (the ranks sharing them) and what --max_length skips or cuts is counted; when nothing can
train, every rank stops there naming the smallest --max_length that trains a sample. A spoken question without
--speech_encoder is named before the model loads too. "Before the model loads" is shown with a model one of whose
weights is NaN: reading the weights would fail on it instead ("tensor '...': element 0 is NaN")."""
import shutil, wave

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from oracle import slam_samples_ref as ref
from omni_run import run

T, A, G = 512, 80, 3
N = 6


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("datacheck")
    ref.make_model_dir(str(d / "model"), T=T, A=A, G=G, hidden=16, layers=1, heads=2, kv_heads=1, inter=32)
    ref.write_jsonl(d / "d.jsonl", ref.make_records(N, A=A, seed=4))
    shutil.copytree(d / "model", d / "broken")   # the model's files, one weight NaN
    w = load_file(str(d / "broken" / "model.safetensors"))
    w["model.embed_tokens.weight"][0, 0] = np.nan
    save_file(w, str(d / "broken" / "model.safetensors"), metadata={"format": "pt"})
    return d


def sft(setup, out, model, *extra, np_=None):
    return run(["sft", "--model", setup / model, "--dataset", setup / "d.jsonl", "--output_dir", out, "--max_steps", 1,
                *extra], np_=np_, check=False, timeout=180)


def oracle(setup, max_length, truncation="right"):
    """(skipped, cut, the smallest --max_length that trains some sample) by the reference's sample builder"""
    tok = str(setup / "model" / "tokenizer.json")
    got, _ = ref.load(str(setup / "d.jsonl"), tok, T, A, G, max_length, truncation)
    whole, _ = ref.load(str(setup / "d.jsonl"), tok, T, A, G, 1 << 20)
    skipped = sum(s is None for s in got)
    cut = sum(s is not None and len(w["ids"][0]) > max_length for s, w in zip(got, whole))
    least = next(m for m in range(2, 4096) if any(s is not None for s in ref.load(str(setup / "d.jsonl"), tok, T, A, G, m, truncation)[0]))
    return skipped, cut, least


@pytest.mark.parametrize("truncation", ["right", "delete"])
def test_a_max_length_below_every_prompt_stops_before_the_model_loads(setup, tmp_path, truncation):
    """every rank stops at start-up with the reason and the smallest --max_length that trains (the reference's);
    that value trains, one less does not"""
    skipped, cut, least = oracle(setup, 20, truncation)
    assert skipped == N
    p = sft(setup, tmp_path / "o", "broken", "--max_length", 20, "--truncation_strategy", truncation, np_=2)
    assert p.returncode != 0
    want = (f"nothing can train: every one of the {N} training samples has no answer position within --max_length 20 "
            f"(--truncation_strategy {truncation}); the shortest needs {least}: give --max_length {least} or more")
    assert want in p.stderr, p.stderr
    assert ("rank 1: stopping because rank 0 failed: nothing can train" in p.stderr
            or "rank 0: stopping because rank 1 failed: nothing can train" in p.stderr), p.stderr
    if truncation == "delete":
        assert "or --truncation_strategy right trains each sample's first max_length positions" in p.stderr
    assert "is NaN" not in p.stderr and "no step had a target token" not in p.stderr, p.stderr
    assert not (tmp_path / "o" / "logging.jsonl").exists()
    assert oracle(setup, least - 1, truncation)[0] == N
    p = sft(setup, tmp_path / "below", "model", "--max_length", least - 1, "--truncation_strategy", truncation)
    assert p.returncode != 0 and "nothing can train" in p.stderr, p.stderr
    p = sft(setup, tmp_path / "at", "model", "--max_length", least, "--truncation_strategy", truncation,
            "--max_steps", N)   # an epoch: the sample that fits is drawn
    assert p.returncode == 0 and "nothing can train" not in p.stderr, p.stderr


@pytest.mark.parametrize("truncation", ["right", "delete"])
@pytest.mark.parametrize("np_", [None, 2])
def test_the_counts_are_the_references(setup, tmp_path, truncation, np_):
    """skipped and cut counted at start-up as the reference's builder counts them, on 1 rank and on 2 (each rank
    builds half), before the model loads; the end-of-run note counts the same skipped samples"""
    lengths = sorted(len(w["ids"][0]) for w in ref.load(str(setup / "d.jsonl"), str(setup / "model" / "tokenizer.json"),
                                                         T, A, G, 1 << 20)[0])
    M = lengths[N // 2]   # about half the samples longer
    skipped, cut, _ = oracle(setup, M, truncation)
    assert 0 < skipped + cut and skipped < N
    line = (f"omnishard sft: data check: of {N} training samples, {skipped} will be skipped (no answer position within "
            f"--max_length {M}, --truncation_strategy {truncation}) and {cut} cut to fit it")
    p = sft(setup, tmp_path / "b", "broken", "--max_length", M, "--truncation_strategy", truncation, np_=np_)
    assert p.returncode != 0 and p.stderr.count(line) == 1, p.stderr   # printed by rank 0, then the load fails
    assert "element 0 is NaN" in p.stderr, p.stderr
    p = sft(setup, tmp_path / "o", "model", "--max_length", M, "--truncation_strategy", truncation, "--max_steps", N,
            np_=np_)   # every sample drawn
    assert p.returncode == 0 and p.stderr.count(line) == 1, p.stderr
    if skipped:
        assert f"note: {skipped} sample(s) skipped" in p.stderr, p.stderr


def test_a_spoken_record_without_speech_encoder_stops_before_the_model_loads(setup, tmp_path):
    with wave.open(str(tmp_path / "q.wav"), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000), w.writeframes(b"\0\0" * 1600)
    recs = ref.make_records(4, A=A, seed=5)
    recs[2]["source_wav"] = "q.wav"
    ref.write_jsonl(tmp_path / "s.jsonl", recs)
    p = run(["sft", "--model", setup / "broken", "--dataset", tmp_path / "s.jsonl", "--output_dir", tmp_path / "o",
             "--max_steps", 1], np_=2, check=False, timeout=180)
    assert p.returncode != 0
    assert (f"{tmp_path}/s.jsonl:3: field 'source_wav': the record has a spoken question ('q.wav') but the model has no "
            "speech encoder (--speech_encoder DIR") in p.stderr, p.stderr
    assert "is NaN" not in p.stderr, p.stderr
