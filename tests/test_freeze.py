"""Freezing (docs/training.md "Freezing"): --freeze_llm, --freeze_group_decode_adapter, --trainable_embed_rows against
the PyTorch oracle with requires_grad False on the same parameters (loss, gradients of the trained parameters,
weights after 3 steps), frozen weights bit-identical after training, N ranks == 1 rank, and plan's memory."""
import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from oracle import slam_omni_ref as ref
from omni_run import sft, logs, weights, rel, run

T, A = 192, 80
CASES = {
    # the LLM frozen except the new embedding rows (tied: embed_tokens and lm_head share them), adapter trained
    "llm_frozen_new_rows_tied": dict(model=dict(G=3, tied=True), flags=["--freeze_llm", "true", "--trainable_embed_rows", "new"],
                                     frozen=lambda n: n.startswith("model.") and "embed_tokens" not in n, row0=T - 64),
    # untied, adapter frozen, only the audio rows of embed_tokens and lm_head, the layers train
    "adapter_frozen_audio_rows_untied": dict(model=dict(G=3, tied=False),
                                             flags=["--freeze_group_decode_adapter", "true", "--trainable_embed_rows", "audio"],
                                             frozen=lambda n: n.startswith("group_decode_adapter."), row0=T),
    # everything but the adapter frozen: nothing below the head trains (no backward through the layers)
    "adapter_only": dict(model=dict(G=3, tied=True), flags=["--freeze_llm", "true"],
                         frozen=lambda n: not n.startswith("group_decode_adapter."), row0=None),
}
COMMON = ["--learning_rate", "1e-3", "--weight_decay", "0.1", "--lr_scheduler_type", "cosine", "--warmup_steps", "1",
          "--max_length", "32", "--save_steps", "0"]


def setup(tmp_path, case):
    c = CASES[case]
    mdir, data = str(tmp_path / "model"), str(tmp_path / "data.jsonl")
    model, adapter = ref.make_model(mdir, T=T, A=A, heads=4, kv_heads=2, **c["model"])
    ref.make_data(data, 7, G=3, T=T, A=A)
    return mdir, data, model, adapter


def original(mdir):
    return weights(mdir)


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_freeze_matches_pytorch(tmp_path, case, bf16, monkeypatch):
    """bf16 (the sgemm path), with the logits in chunks of 8 rows: the head's stash of rounded gradients
    (src/model/loss.h) with a frozen or partly trained head and a frozen adapter. Against the oracle within the bf16
    class bound (docs/training.md; here the sgemm path is 2e-4 off in step 3's gradient norm on the build before the
    stash too), and against the same run in one chunk per class of rows (one stash each) tightly: the stash's row offsets."""
    c = CASES[case]
    mdir, data, model, adapter = setup(tmp_path, case)
    out = tmp_path / "out"
    dt = []
    if bf16:
        monkeypatch.setenv("OMNISHARD_BF16_GEMM", "sgemm"), monkeypatch.setenv("OMNISHARD_LOGITS_ROWS", "8")
        dt = ["--torch_dtype", "bfloat16"]
    sft(mdir, data, out, 3, [*COMMON, *c["flags"], *dt, "--dump_grads", str(tmp_path / "g.safetensors")])
    named = dict(model.named_parameters())
    if adapter is not None:
        named.update({f"group_decode_adapter.{k}": v for k, v in adapter.named_parameters()})
    for n, p in named.items():
        p.requires_grad_(not c["frozen"](n))
    rlogs, rgrads, rfinal = ref.train(model, adapter, ref.load_data(data, 32), G=3, T=T, A=A, steps=3, lr=1e-3, wd=0.1,
                                      sched="cosine", warmup=1, embed_row0=c["row0"], bf16="inputs" if bf16 else None)
    tol, tol_t = (1e-3, 2e-2) if bf16 else (1e-5, 1e-4)   # logged numbers; tensors
    clogs = logs(out)
    for cl, rl in zip(clogs, rlogs):
        for k in ("loss", "grad_norm", "text_loss", "audio_loss_0"):
            assert abs(cl[k] - rl[k]) <= tol * abs(rl[k]), (k, cl[k], rl[k])
    cg = load_file(str(tmp_path / "g.safetensors"))
    assert set(cg) == set(rgrads), set(cg) ^ set(rgrads)   # frozen parameters have no gradient
    for k, g in rgrads.items():
        assert rel(cg[k], g.numpy()) <= tol_t, (k, rel(cg[k], g.numpy()))
    cw, w0 = weights(out / "final_model"), original(mdir)
    for k, w in rfinal.items():
        assert rel(cw[k], w.numpy()) <= tol_t, (k, rel(cw[k], w.numpy()))
    for k in w0:   # frozen tensors and frozen rows: bit-identical after 3 steps with weight decay
        if k not in rfinal:
            assert np.array_equal(cw[k], w0[k]), k
    for k in ("model.embed_tokens.weight", "lm_head.weight"):
        if c["row0"] is not None and k in w0:
            assert np.array_equal(cw[k][:c["row0"]], w0[k][:c["row0"]]), k
            assert not np.array_equal(cw[k][c["row0"]:], w0[k][c["row0"]:]), k
    if bf16:   # one chunk: the step-1 gradients differ only in how the head's weight gradients group their rows
        monkeypatch.setenv("OMNISHARD_LOGITS_ROWS", "1000")
        sft(mdir, data, tmp_path / "one", 1, [*COMMON, *c["flags"], *dt, "--dump_grads", str(tmp_path / "g1.safetensors")])
        g1 = load_file(str(tmp_path / "g1.safetensors"))
        for k in g1:
            assert rel(cg[k], g1[k]) <= 1e-6, (k, rel(cg[k], g1[k]))


@pytest.mark.parametrize("stage", [1, 3])
def test_freeze_n_ranks_equal_one_rank(tmp_path, stage):
    case = "llm_frozen_new_rows_tied"
    mdir, data, _, _ = setup(tmp_path, case)
    flags = [*COMMON, *CASES[case]["flags"]]
    sft(mdir, data, tmp_path / "one", 3, [*flags, "--gradient_accumulation_steps", 2])
    sft(mdir, data, tmp_path / "two", 3, [*flags, "--zero_stage", stage], np_=2)
    a, b = logs(tmp_path / "two"), logs(tmp_path / "one")
    for x, y in zip(a, b):
        assert abs(x["loss"] - y["loss"]) <= 1e-6 * abs(y["loss"]), (x, y)
    wa, wb = weights(tmp_path / "two" / "final_model"), weights(tmp_path / "one" / "final_model")
    for k in wb:
        assert rel(wa[k], wb[k]) <= 1e-5, (k, rel(wa[k], wb[k]))
    # model state of the single rank (stage 0): every parameter, but gradients only for the embedding and the
    # adapter and moments only for the new rows and the adapter (hidden 32, 4 heads of 8, 2 kv heads, MLP 64)
    C, V = 32, T + A
    layer = (C * C + C) + 2 * (16 * C + 16) + C * C + 2 * C + 3 * 64 * C
    emb, ad = V * C, A * 3 * A + 3 * A
    want = 4 * (emb + 2 * layer + C + ad) + 4 * (emb + ad) + 8 * ((V - (T - 64)) * C + ad)
    assert b[0]["model_state_bytes"] == want, (b[0]["model_state_bytes"], want)


def plan_row(args, stage):
    # accumulation 2: every gradient slice is held at the peak (with 1, stage 2/3 count only those reduced by then)
    out = run(["plan", "--model", "qwen2.5-0.5b", "--nproc", 2, "--zero_stage", stage, "--gradient_checkpointing",
               "true", "--gradient_accumulation_steps", 2, *args]).stdout
    row = [l.split() for l in out.splitlines() if l.split()[:1] == [str(stage)]][0]
    return dict(params=float(row[2]), grads=float(row[3]), optim=float(row[4]))


@pytest.mark.parametrize("stage", [0, 3])
def test_plan_counts_only_trained_parameters(stage):
    full = plan_row([], stage)
    # only the adapter trains: Linear(4160, 3 * 4160) with bias
    ad = 3 * 4160 * 4160 + 3 * 4160
    new = (156160 - (152000 - 64)) * 896   # rows of the 64 special text ids and the 4160 audio ids
    share = 1 if stage == 0 else 2
    # the new rows are the embedding's last, all within the last rank's slice: that rank holds all their moments
    for args, grads, moments in ((["--freeze_llm", "true"], ad, ad / share),
                                 (["--freeze_llm", "true", "--trainable_embed_rows", "new"], ad + 156160 * 896,
                                  ad / share + new)):
        p = plan_row(args, stage)
        assert p["params"] == full["params"]
        assert abs(p["grads"] - 4 * grads / share / 1e9) <= 2e-3, (args, p)
        assert abs(p["optim"] - 8 * moments / 1e9) <= 2e-3, (args, p)
        assert p["grads"] < full["grads"] / 2 and p["optim"] < full["optim"] / 5


def test_freeze_resume_is_bitwise(tmp_path):
    """Checkpoints hold moments only for the trained rows; a frozen run resumes bitwise (2 ranks, ZeRO-3)."""
    case = "llm_frozen_new_rows_tied"
    mdir, data, _, _ = setup(tmp_path, case)
    flags = [*COMMON, *CASES[case]["flags"], "--deepspeed", "zero3"]
    sft(mdir, data, tmp_path / "full", 4, [*flags, "--save_steps", 2], np_=2)
    sft(mdir, data, tmp_path / "res", 4,
        [*flags, "--save_steps", 2, "--resume_from_checkpoint", tmp_path / "full" / "checkpoint-2"], np_=2)
    assert [x["loss"] for x in logs(tmp_path / "full")[2:]] == [x["loss"] for x in logs(tmp_path / "res")]
    wa, wb = weights(tmp_path / "full" / "final_model"), weights(tmp_path / "res" / "final_model")
    for k in wa:
        assert np.array_equal(wa[k], wb[k]), k


@pytest.mark.parametrize("flags,msg", [
    (["--freeze_encoder", "false"], "training the speech encoder is not supported"),
    (["--freeze_group_decode_adapter", "true", "--code_layer", "1"], "has no group-decode adapter"),
    (["--freeze_encoder_projector", "true"], "has no encoder projector"),
    (["--trainable_embed_rows", "old"], "expected all, new, audio or none"),
    (["--freeze_llm", "true", "--freeze_group_decode_adapter", "true"], "nothing to train"),
])
def test_freeze_errors(tmp_path, flags, msg):
    mdir, data, _, _ = setup(tmp_path, "adapter_only")
    p = sft(mdir, data, tmp_path / "o", 1, flags, check=False)
    assert p.returncode != 0 and msg in p.stderr, p.stderr
