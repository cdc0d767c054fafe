"""--packing true (issue 22 item 4; docs/dataset.md "Packing"): several samples in one row of up to --max_length
positions, attention inside a sample only, positions restarting per sample, losses per sample as unpacked.

Reference values are the unpacked run's (the same samples in one micro-batch: ms-swift's loss is the mean over the
batch's target tokens either way) and invariants of the packed row (changing one packed sample moves no other
sample's logits; a packed sample's logits are those of the sample trained alone)."""
import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from oracle import slam_omni_ref as ref
from omni_run import sft, logs, weights, rel

N = 6
COMMON = ["--learning_rate", "1e-3", "--lr_scheduler_type", "linear", "--weight_decay", "0.1", "--save_strategy", "no"]
LOSSES = ["loss", "text_loss", "audio_loss_0", "audio_loss_1", "audio_loss_2", "text_acc", "audio_acc_2"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("packing")
    ref.make_model(str(d / "model"), hidden=16, layers=2, heads=2, kv_heads=1, inter=32, T=128, A=64, G=3, seed=5)
    # no -100 prompt region: a sample's first label is a real id, which packing must not make a target of the
    # previous sample's last position
    ref.make_data(str(d / "data.jsonl"), N, G=3, T=128, A=64, seed=6, ignore_prompt=False)
    return d


def flat(tensors):
    return np.concatenate([tensors[k].ravel().astype(np.float64) for k in sorted(tensors)])


def same_losses(la, lb):
    """logged losses and accuracies of each step equal to 1e-6"""
    assert len(la) == len(lb)
    for a, b in zip(la, lb):
        for k in LOSSES:
            assert abs(a[k] - b[k]) <= 1e-6 * max(abs(a[k]), 1e-3), (a["step"], k, a[k], b[k])


def lengths(path):
    return [len(json.loads(l)["input_ids"][0]) for l in open(path)]


def test_packed_equals_unpacked(tiny, tmp_path):
    """Every step a whole epoch (all samples in one micro-batch unpacked; all rows in one micro-batch packed): the
    logged losses per layer, the first step's gradients and the weights after 3 steps agree to 1e-6 (the whole
    model's relative error; 1e-5 per tensor)."""
    L = lengths(tiny / "data.jsonl")
    maxlen = max(L) + 8   # at least two rows
    rows = 1
    used = 0
    for n in L:
        if used and used + n > maxlen:
            rows, used = rows + 1, 0
        used += n
    assert 1 < rows < N
    u, p = tmp_path / "u", tmp_path / "p"
    sft(tiny / "model", tiny / "data.jsonl", u, 3, [*COMMON, "--per_device_train_batch_size", N,
                                                    "--dump_grads", tmp_path / "gu.safetensors"])
    r = sft(tiny / "model", tiny / "data.jsonl", p, 3, [*COMMON, "--packing", "true", "--max_length", maxlen,
                                                        "--per_device_train_batch_size", rows,
                                                        "--dump_grads", tmp_path / "gp.safetensors"])
    assert f"--packing true: {N} training samples in {rows} rows of up to {maxlen} positions" in r.stderr, r.stderr
    lu, lp = logs(u), logs(p)
    assert [x["step"] for x in lp] == [1, 2, 3] and [x["epoch"] for x in lp] == [x["epoch"] for x in lu]
    same_losses(lu, lp)
    gu, gp = load_file(tmp_path / "gu.safetensors"), load_file(tmp_path / "gp.safetensors")
    assert gu.keys() == gp.keys()
    assert rel(flat(gp), flat(gu)) < 1e-6
    # per tensor 1e-5: a k_proj bias gradient nearly cancels (a constant key shift moves no softmax), so its relative
    # error is that of a difference of large terms
    for k in gu:
        assert rel(gp[k], gu[k]) < 1e-5, (k, rel(gp[k], gu[k]))
    wu, wp = weights(u / "final_model"), weights(p / "final_model")
    assert rel(flat(wp), flat(wu)) < 1e-6
    for k in wu:   # AdamW divides by the root of the second moment: float noise of small gradients grows a little
        assert rel(wp[k], wu[k]) < 1e-5, (k, rel(wp[k], wu[k]))


def test_packed_rows_over_ranks(tiny, tmp_path):
    """Packed rows are the data stream as samples were: 2 ranks x batch 1 row (ZeRO-3) train as 1 rank x 2
    accumulated micro-batches of 1 row (docs/training.md "Sample order and batches")."""
    extra = [*COMMON, "--packing", "true", "--max_length", max(lengths(tiny / "data.jsonl")), "--num_train_epochs", 2]
    one, two = tmp_path / "one", tmp_path / "two"
    sft(tiny / "model", tiny / "data.jsonl", one, 0, [*extra, "--gradient_accumulation_steps", 2])
    sft(tiny / "model", tiny / "data.jsonl", two, 0, [*extra, "--deepspeed", "zero3"], np_=2)
    l1, l2 = logs(one), logs(two)
    assert len(l1) == len(l2) >= 2
    same_losses(l1, l2)
    w1, w2 = weights(one / "final_model"), weights(two / "final_model")
    assert rel(flat(w2), flat(w1)) < 1e-6


def write_samples(path, samples):
    with open(path, "w") as f:
        for s in samples:
            f.write(json.dumps(s) + "\n")


def first_logits(d, data, out, extra):
    sft(d / "model", data, out, 1, [*COMMON, "--dump_logits", out.parent / (out.name + ".logits"), *extra])
    return next(iter(load_file(out.parent / (out.name + ".logits")).values())).astype(np.float64)


def test_packed_samples_never_see_each_other(tiny, tmp_path):
    """One row of three samples: changing the middle sample's ids changes its own logits only; the last sample's
    logits equal those of that sample trained alone (its attention and its positions start at its first token)."""
    recs = [json.loads(l) for l in open(tiny / "data.jsonl")][:3]
    L = [len(r["input_ids"][0]) for r in recs]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_samples(a, recs)
    changed = json.loads(json.dumps(recs))
    for row in changed[1]["input_ids"]:
        row.reverse()
    write_samples(b, changed)
    packed = ["--packing", "true", "--max_length", sum(L)]
    la = first_logits(tiny, a, tmp_path / "la", packed)
    lb = first_logits(tiny, b, tmp_path / "lb", packed)
    assert la.shape[0] == sum(L)
    s0, s1 = L[0], L[0] + L[1]
    assert np.array_equal(la[:s0], lb[:s0]) and np.array_equal(la[s1:], lb[s1:])
    assert np.abs(la[s0:s1] - lb[s0:s1]).max() > 1e-3   # the changed sample's own logits did move
    alone = tmp_path / "alone.jsonl"
    write_samples(alone, recs[2:])
    lc = first_logits(tiny, alone, tmp_path / "lc", [])
    assert np.abs(la[s1:] - lc).max() <= 1e-5 * np.abs(lc).max()


def test_bad_combinations_are_refused(tiny, tmp_path):
    r = sft(tiny / "model", tiny / "data.jsonl", tmp_path / "o1", 1,
            ["--packing", "true", "--per_device_train_batch_size", 257], check=False)
    assert r.returncode != 0 and "--per_device_train_batch_size 257: at most 256 packed rows with --packing true" in r.stderr, r.stderr
    from omni_run import run
    r = run(["sft", "--model", tiny / "model", "--dataset", tiny / "data.jsonl", "--output_dir", tmp_path / "o2",
             "--max_steps", 1, "--packing", "true"], check=False, env={"OMNISHARD_LOG_SAMPLES": "1"})
    assert r.returncode != 0 and "--packing true with OMNISHARD_LOG_SAMPLES=1" in r.stderr, r.stderr


def test_resume_with_other_packing_is_refused(tiny, tmp_path):
    out = tmp_path / "o"
    sft(tiny / "model", tiny / "data.jsonl", out, 1, ["--save_steps", 1])
    r = sft(tiny / "model", tiny / "data.jsonl", tmp_path / "o2", 2,
            ["--packing", "true", "--resume_from_checkpoint", out / "checkpoint-1"], check=False)
    assert r.returncode != 0 and f"--packing: {out}/checkpoint-1 was trained with false, this run has true" in r.stderr, r.stderr


def test_packed_speech_equals_unpacked(tmp_path):
    """Rows holding several spoken samples: each WAV's encoder and projector output fills its own sample's speech
    span (the speech front end's slots per row, session/speech.h); losses per layer and the first step's gradients
    (projector included) equal the unpacked ones, all samples in one micro-batch, to 1e-6."""
    from test_speech_train import write_wav, write_data, G, T, A
    ref.make_model(str(tmp_path / "model"), hidden=32, layers=1, heads=4, kv_heads=2, inter=48, T=T, A=A, G=G,
                   tied=True, seed=0)
    ref.add_projector(str(tmp_path / "model"), 16, 24, 32)
    ref.make_encoder(str(tmp_path / "enc"), d_model=16, layers=1, heads=4, ffn=32, max_pos=30, layout="cond")
    for name, sec, fr in [("a.wav", 0.3, 300), ("b.wav", 0.6, 500), ("c.wav", 1.1, 700)]:
        write_wav(tmp_path / name, sec, fr, seed=fr)
    write_data(tmp_path / "d.jsonl", 6, {0: "a.wav", 1: "b.wav", 3: "c.wav", 4: "a.wav"})
    L = lengths(tmp_path / "d.jsonl")
    maxlen = L[0] + L[1] + L[2]   # row 0: samples 0, 1 (both spoken) and 2
    common = [*COMMON, "--speech_encoder", tmp_path / "enc", "--max_length", maxlen, "--num_train_epochs", 2]
    u, p = tmp_path / "u", tmp_path / "p"
    sft(tmp_path / "model", tmp_path / "d.jsonl", u, 0, [*common, "--per_device_train_batch_size", 6,
                                                         "--dump_grads", tmp_path / "gu.safetensors"])
    r = sft(tmp_path / "model", tmp_path / "d.jsonl", p, 0, [*common, "--packing", "true",
                                                             "--per_device_train_batch_size", 6,
                                                             "--dump_grads", tmp_path / "gp.safetensors"])
    assert "--packing true: 6 training samples in" in r.stderr, r.stderr
    lu, lp = logs(u), logs(p)
    assert len(lu) == len(lp) == 2
    same_losses(lu, lp)
    gu, gp = load_file(tmp_path / "gu.safetensors"), load_file(tmp_path / "gp.safetensors")
    assert rel(flat(gp), flat(gu)) < 1e-6
    proj = [k for k in gu if "projector" in k]
    assert proj and all(rel(gp[k], gu[k]) < 1e-5 for k in proj), [(k, rel(gp[k], gu[k])) for k in proj]
