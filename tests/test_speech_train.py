"""Training steps with speech inputs (WAV -> log-mel -> frozen Whisper encoder -> projector -> splice) against the
PyTorch oracle (tests/oracle/slam_omni_ref.py: transformers' WhisperEncoder frozen in eval mode, openai-whisper's
log-mel, the projector and the G+1-mean splice in torch), on 1 rank and on 2 ranks at ZeRO-3 where one rank's
micro-batch has speech and the other's has none; the feature cache; speech-input errors; projector init/export.

Sizes: the facts doc's tiny encoder (d 16, 2 blocks, max_source_positions 30): 9600 samples -> 60 mel frames ->
30 encoder frames -> T_s = 6 LLM positions per speech input.
"""
import json, os, wave

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file, save_file

from oracle import slam_omni_ref as ref
from omni_run import sft, logs, weights, rel

G, T, A, HID, T_S = 3, 192, 80, 24, 6
COMMON = ["--learning_rate", "1e-3", "--lr_scheduler_type", "linear", "--max_length", "64", "--weight_decay", "0.1"]


def write_wav(path, seconds, freq, seed):
    t = np.arange(int(16000 * seconds)) / 16000
    x = 0.5 * np.sin(2 * np.pi * freq * t) + 0.05 * np.random.default_rng(seed).standard_normal(t.size)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())


def write_data(path, n, speech, seed=2):
    """n pretokenized samples; sample i in `speech` (a dict i -> wav name) has a prompt, a T_S speech span
    (audio rows pad_a, text row pad_t, labels -100) and an answer; the others are plain random samples."""
    g = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(n):
            P = int(g.integers(2, 5)) if i in speech else 0
            La = int(g.integers(4, 8))
            L = P + (T_S if i in speech else 0) + La
            ids = [[int(T + x) for x in g.integers(0, A, L)] for _ in range(G)] + [[int(x) for x in g.integers(0, T, L)]]
            lab = [[int(x) for x in g.integers(0, A, L)] for _ in range(G)] + [[int(x) for x in g.integers(0, T, L)]]
            rec = {}
            if i in speech:
                for r in range(G + 1):
                    for p in range(P, P + T_S):
                        ids[r][p] = T + A - 63 if r < G else T - 63   # pad_a / pad_t
                    lab[r][:P + T_S] = [-100] * (P + T_S)
                rec = {"speech_wav": speech[i], "speech_start": P}
            f.write(json.dumps({"input_ids": ids, "labels": lab, **rec}) + "\n")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("speech")
    model, adapter = ref.make_model(str(d / "model"), hidden=32, layers=2, heads=4, kv_heads=2, inter=48, T=T, A=A, G=G,
                                    tied=True, seed=0)
    proj = ref.add_projector(str(d / "model"), 16, HID, 32)
    enc = ref.make_encoder(str(d / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    for name, sec, fr in [("short.wav", 0.3, 300), ("exact.wav", 0.6, 500), ("long.wav", 1.1, 700)]:
        write_wav(d / name, sec, fr, seed=fr)
    perm = ref.epoch_perm(6, 42, 0)
    # pairs (perm[0], perm[1]), (perm[2], perm[3]), (perm[4], perm[5]): speech in one of the first, both of the second
    speech = {perm[0]: "short.wav", perm[2]: "exact.wav", perm[3]: "long.wav"}
    write_data(d / "data.jsonl", 6, speech)
    return d, model, adapter, proj, enc


def fresh(setup):
    """The oracle modules mutate while training: reload them from the saved directories."""
    d, model, adapter, proj, enc = setup
    m = type(model).from_pretrained(str(d / "model")).float()
    a = ref.Adapter(A, G)
    p = ref.Projector(16, HID, 32)
    st = load_file(str(d / "model" / "slam_omni.safetensors"))
    a.load_state_dict({k[len("group_decode_adapter."):]: torch.from_numpy(v) for k, v in st.items() if k.startswith("group_")})
    p.load_state_dict({k[len("encoder_projector."):]: torch.from_numpy(v) for k, v in st.items() if k.startswith("encoder_p")})
    return m, a, p, enc


def compare(out, gpath, rlogs, rgrads, rfinal):
    clogs = logs(out)
    assert len(clogs) == len(rlogs)
    for c, r in zip(clogs, rlogs):
        for k in ("loss", "grad_norm", "text_loss", "audio_loss_0", "audio_loss_2"):
            assert abs(c[k] - r[k]) <= 1e-5 * max(abs(r[k]), 1e-6), (k, c[k], r[k], c["step"])
    cg = load_file(str(gpath))
    assert set(cg) == set(rgrads), set(cg) ^ set(rgrads)   # no encoder.* gradient on either side
    for k, g in rgrads.items():
        assert rel(cg[k], g.numpy()) <= 1e-4, (k, rel(cg[k], g.numpy()))
    assert np.abs(cg["encoder_projector.linear1.weight"]).max() > 0
    cw = weights(os.path.join(out, "final_model"))
    assert not [k for k in cw if k.startswith("encoder.")]   # the frozen encoder is not exported
    for k, w in rfinal.items():
        assert rel(cw[k], w.numpy()) <= 1e-4, (k, rel(cw[k], w.numpy()))


@pytest.mark.parametrize("ranks", [1, 2])
def test_speech_step_matches_pytorch(setup, ranks):
    d = setup[0]
    out, gpath = d / f"out{ranks}", d / f"grads{ranks}.safetensors"
    extra = ["--deepspeed", "zero3"] if ranks == 2 else ["--per_device_train_batch_size", "2"]
    sft(d / "model", d / "data.jsonl", out, 3, [*COMMON, *extra, "--speech_encoder", d / "enc", "--dump_grads", gpath],
        np_=ranks if ranks > 1 else None)
    m, a, p, enc = fresh(setup)
    rlogs, rgrads, rfinal = ref.train(m, a, ref.load_data(str(d / "data.jsonl"), 64), G=G, T=T, A=A, steps=3, lr=1e-3,
                                      wd=0.1, batch=2 if ranks == 1 else 1, accum=1 if ranks == 1 else 2, encoder=enc,
                                      projector=p)
    assert all(q.grad is None for q in enc.parameters())
    compare(out, gpath, rlogs, rgrads, rfinal)
    cfg = json.load(open(out / "final_model" / "slam_omni.json"))
    assert (cfg["encoder_dim"], cfg["projector_hidden"], cfg["encoder_projector_ds_rate"]) == (16, HID, 5)


def test_cov1d_projector_step_matches_pytorch(setup, tmp_path):
    """The reference's "cov1d-linear" projector (EncoderProjectorCov1d), chosen by slam_omni.json: 3 steps on 2 ranks
    at ZeRO-3 equal the PyTorch oracle (losses, every gradient of step 1, weights after 3 steps)."""
    import shutil
    d = setup[0]
    mdir = tmp_path / "model"
    shutil.copytree(d / "model", mdir)
    st = {k: v for k, v in load_file(str(mdir / "slam_omni.safetensors")).items() if not k.startswith("encoder_p")}
    save_file(st, str(mdir / "slam_omni.safetensors"))
    ref.add_projector(str(mdir), 16, HID, 32, kind="cov1d-linear")
    out, gpath = tmp_path / "out", tmp_path / "grads.safetensors"
    sft(mdir, d / "data.jsonl", out, 3, [*COMMON, "--deepspeed", "zero3", "--speech_encoder", d / "enc",
                                         "--dump_grads", gpath], np_=2)
    m = type(setup[1]).from_pretrained(str(mdir)).float()
    a, p = ref.Adapter(A, G), ref.ProjectorCov1d(16, HID, 32)
    st = load_file(str(mdir / "slam_omni.safetensors"))
    a.load_state_dict({k[len("group_decode_adapter."):]: torch.from_numpy(v) for k, v in st.items() if k.startswith("group_")})
    p.load_state_dict({k[len("encoder_projector."):]: torch.from_numpy(v) for k, v in st.items() if k.startswith("encoder_p")})
    rlogs, rgrads, rfinal = ref.train(m, a, ref.load_data(str(d / "data.jsonl"), 64), G=G, T=T, A=A, steps=3, lr=1e-3,
                                      wd=0.1, batch=1, accum=2, encoder=setup[4], projector=p)
    assert "encoder_projector.conv1d.weight" in rgrads
    compare(out, gpath, rlogs, rgrads, rfinal)
    cfg = json.load(open(out / "final_model" / "slam_omni.json"))
    assert cfg["encoder_projector"] == "cov1d-linear"
    assert load_file(str(out / "final_model" / "slam_omni.safetensors"))["encoder_projector.conv1d.weight"].shape == (16, 16, 5)
    # a cov1d checkpoint read as the (default) linear projector is refused, not misread
    json.dump({k: v for k, v in cfg.items() if k != "encoder_projector"}, open(mdir / "slam_omni.json", "w"))
    r = sft(mdir, d / "data.jsonl", tmp_path / "bad", 1, [*COMMON, "--speech_encoder", d / "enc"], check=False)
    assert r.returncode != 0 and "cov1d-linear" in r.stderr, r.stderr


def test_feature_cache_gives_identical_results(setup):
    d = setup[0]
    args = [*COMMON, "--per_device_train_batch_size", "2", "--speech_encoder", d / "enc"]
    cache = d / "cache"
    sft(d / "model", d / "data.jsonl", d / "nocache", 3, args)
    sft(d / "model", d / "data.jsonl", d / "cache1", 3, [*args, "--cache_speech_features", cache])
    files = sorted(cache.glob("*.safetensors"))
    assert len(files) == 3
    stamps = [f.stat().st_mtime_ns for f in files]
    sft(d / "model", d / "data.jsonl", d / "cache2", 3, [*args, "--cache_speech_features", cache])
    assert [f.stat().st_mtime_ns for f in files] == stamps   # read, not rewritten
    base = logs(d / "nocache")
    for run in ("cache1", "cache2"):
        assert [x["loss"] for x in logs(d / run)] == [x["loss"] for x in base]
        wa, wb = weights(d / run / "final_model"), weights(d / "nocache" / "final_model")
        for k in wb:
            assert np.array_equal(wa[k], wb[k]), (run, k)
    # the cached values are what the run uses: altered features (same key) change the loss
    from safetensors import safe_open
    with safe_open(str(files[0]), "np") as f:
        meta, x = f.metadata(), f.get_tensor("encoder_output")
    save_file({"encoder_output": x + 1.0}, str(files[0]), metadata=meta)
    sft(d / "model", d / "data.jsonl", d / "cache3", 3, [*args, "--cache_speech_features", cache])
    assert [x["loss"] for x in logs(d / "cache3")] != [x["loss"] for x in base]


def bad_run(d, tmp, wav_name=None, speech_start=None, extra=("--speech_encoder",), mutate=None):
    recs = [json.loads(l) for l in open(d / "data.jsonl")]
    for r in recs:   # the copy lives elsewhere: absolute WAV paths
        if "speech_wav" in r:
            r["speech_wav"] = str(d / r["speech_wav"])
    k = next(i for i, r in enumerate(recs) if "speech_wav" in r)
    if wav_name is not None:
        recs[k]["speech_wav"] = wav_name
    if speech_start is not None:
        recs[k]["speech_start"] = speech_start
    if mutate:
        mutate(recs[k])
    data = tmp / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in recs))
    args = [*COMMON]
    if "--speech_encoder" in extra:
        args += ["--speech_encoder", d / "enc"]
    r = sft(d / "model", data, tmp / "out", 1, args, check=False)
    assert r.returncode != 0
    return r.stderr, f"data.jsonl:{k + 1}"


def test_speech_input_errors(setup, tmp_path):
    d = setup[0]
    (tmp_path / "empty.wav").write_bytes(b"")
    (tmp_path / "text.wav").write_text("this is not audio\n" * 20)
    (tmp_path / "corrupt.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt " + os.urandom(64))
    (tmp_path / "data.txt").write_text("hello")
    for name, why in [("missing.wav", "No such file"), ("empty.wav", "empty file"), ("text.wav", "not a readable audio"),
                      ("corrupt.wav", "not a readable audio"), ("data.txt", "not a readable audio")]:
        err, where = bad_run(d, tmp_path, wav_name=str(tmp_path / name))
        assert where in err and name in err and why in err, (name, err)
    err, where = bad_run(d, tmp_path, extra=())
    assert where in err and "--speech_encoder" in err, err
    err, where = bad_run(d, tmp_path, speech_start=40)
    assert where in err and "does not fit" in err, err

    def label_in_span(r):
        r["labels"][3][r["speech_start"] + 1] = 5
    err, where = bad_run(d, tmp_path, mutate=label_in_span)
    assert where in err and "must be -100" in err, err


@pytest.mark.parametrize("kind", ["linear", "cov1d-linear"])
def test_projector_initialised_when_absent(setup, tmp_path, kind):
    """No projector in the checkpoint: PyTorch's Linear / Conv1d init, uniform(+-1/sqrt(fan_in)); it trains and is
    exported."""
    d = setup[0]
    mdir = tmp_path / "model"
    ref.make_model(str(mdir), hidden=32, layers=2, heads=4, kv_heads=2, inter=48, T=T, A=A, G=G, tied=True, seed=0)
    cfg = json.load(open(mdir / "slam_omni.json"))
    json.dump({**cfg, "projector_hidden": HID, "encoder_projector": kind}, open(mdir / "slam_omni.json", "w"))
    sft(mdir, d / "data.jsonl", tmp_path / "out", 1, ["--learning_rate", "0", "--per_device_train_batch_size", "2",
        "--speech_encoder", d / "enc", "--dump_grads", tmp_path / "g.safetensors"])
    w = weights(tmp_path / "out" / "final_model")
    if kind == "cov1d-linear":   # Conv1d(16, 16, 5): fan_in 80; linear1 then takes the 16 channels
        for name in ("conv1d.weight", "conv1d.bias"):
            x, bound = w[f"encoder_projector.{name}"], 1 / np.sqrt(80)
            assert np.abs(x).max() <= bound and np.abs(x).max() > 0.8 * bound, name
        assert w["encoder_projector.conv1d.weight"].shape == (16, 16, 5)
        assert w["encoder_projector.linear1.weight"].shape == (HID, 16)
        return
    for name, fan_in in [("linear1.weight", 80), ("linear1.bias", 80), ("linear2.weight", HID), ("linear2.bias", HID)]:
        x, bound = w[f"encoder_projector.{name}"], 1 / np.sqrt(fan_in)
        assert np.abs(x).max() <= bound and np.abs(x).max() > 0.8 * bound, name
        if x.size > 500:
            assert abs(x.std() - bound / np.sqrt(3)) < 0.1 * bound / np.sqrt(3), name
    assert w["encoder_projector.linear1.weight"].shape == (HID, 80) and w["encoder_projector.linear2.weight"].shape == (32, HID)
    g = load_file(str(tmp_path / "g.safetensors"))
    assert np.abs(g["encoder_projector.linear1.weight"]).max() > 0 and not [k for k in g if k.startswith("encoder.")]


def test_checkpoint_resume_and_export_with_speech(setup):
    """Checkpoints hold the model's own buckets (projector included), not the frozen encoder: resuming (the encoder is
    read again from --speech_encoder) is bitwise, and `omnishard export` of a checkpoint equals the final model."""
    from omni_run import run
    d = setup[0]
    args = [*COMMON, "--deepspeed", "zero3", "--speech_encoder", d / "enc", "--save_steps", "2"]
    sft(d / "model", d / "data.jsonl", d / "ck_full", 4, args, np_=2)
    man = json.load(open(d / "ck_full" / "checkpoint-2" / "manifest.json"))
    assert "encoder_projector" in [b["name"] for b in man["buckets"]]
    assert not [p for p in man["parameters"] if p["name"].startswith("encoder.")]
    sft(d / "model", d / "data.jsonl", d / "ck_res", 4,
        [*args, "--resume_from_checkpoint", d / "ck_full" / "checkpoint-2"], np_=2)
    a, b = logs(d / "ck_full"), logs(d / "ck_res")
    assert [x["loss"] for x in a[2:]] == [x["loss"] for x in b]
    wa, wb = weights(d / "ck_full" / "final_model"), weights(d / "ck_res" / "final_model")
    for k in wa:
        assert np.array_equal(wa[k], wb[k]), k
    run(["export", "--checkpoint", d / "ck_full" / "checkpoint-4", "--output_dir", d / "ck_exp"])
    we = weights(d / "ck_exp")
    assert set(we) == set(wa)
    for k in wa:
        assert np.array_equal(wa[k], we[k]), k
