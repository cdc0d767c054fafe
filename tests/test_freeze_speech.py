"""Freezing and LoRA with speech inputs (the projector's gradient flows through frozen layers) against the PyTorch
oracle on 2 ranks at ZeRO-3: only the projector trained; LoRA + projector + new rows against PEFT; the projector
frozen. Fixtures and helpers of tests/test_speech_train.py."""
import os, shutil
import numpy as np
import torch
from safetensors.torch import save_file, load_file
from peft import LoraConfig, get_peft_model

from oracle import slam_omni_ref as ref
from omni_run import sft, weights
from test_speech_train import setup, fresh, compare, COMMON, G, T, A  # noqa: F401 (setup: the module fixture)

RUN = [*COMMON, "--deepspeed", "zero3"]


def run_both(setup, out, flags, prepare, embed_row0=None):
    """prepare(m, a, p, mdir) -> the oracle's model; it may write into mdir, a copy of the model directory"""
    d = setup[0]
    mdir = out.parent / (out.name + "_model")
    shutil.copytree(d / "model", mdir)
    m, a, p, enc = fresh(setup)
    m = prepare(m, a, p, mdir)
    gpath = out.parent / (out.name + ".safetensors")
    sft(mdir, d / "data.jsonl", out, 3, [*RUN, *flags, "--speech_encoder", d / "enc", "--dump_grads", gpath], np_=2)
    rlogs, rgrads, rfinal = ref.train(m, a, ref.load_data(str(d / "data.jsonl"), 64), G=G, T=T, A=A, steps=3, lr=1e-3,
                                      wd=0.1, batch=1, accum=2, encoder=enc, projector=p, embed_row0=embed_row0)
    strip = lambda k: k.replace("base_model.model.", "", 1).replace(".default.", ".")
    rgrads = {strip(k): v for k, v in rgrads.items()}
    rfinal = {strip(k): v for k, v in rfinal.items() if "lora_" not in k}
    compare(out, gpath, rlogs, rgrads, rfinal)
    return rfinal


def test_only_the_projector_trains(setup, tmp_path):
    def prepare(m, a, p, mdir):
        for q in [*m.parameters(), *a.parameters()]:
            q.requires_grad_(False)
        return m
    rfinal = run_both(setup, tmp_path / "o", ["--freeze_llm", "true", "--freeze_group_decode_adapter", "true"], prepare)
    assert set(rfinal) == {k for k in rfinal if k.startswith("encoder_projector.")}
    w0, w = weights(setup[0] / "model"), weights(tmp_path / "o" / "final_model")
    for k in w0:
        assert np.array_equal(w[k], w0[k]) != k.startswith("encoder_projector."), k


def test_lora_with_speech_matches_peft(setup, tmp_path):
    def prepare(m, a, p, mdir):   # random A and B (B != 0: A gets a gradient at step 1), given to omnishard too
        pm = get_peft_model(m, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "up_proj"]))
        pm.get_base_model().get_input_embeddings().weight.requires_grad_(True)
        torch.manual_seed(7)
        init = {}
        with torch.no_grad():
            for n, q in pm.named_parameters():
                if "lora_" in n:
                    q.copy_(0.2 * torch.randn_like(q))
                    init[n.replace("base_model.model.", "", 1).replace(".default.", ".")] = q.detach().clone()
        path = os.path.join(mdir, "slam_omni.safetensors")
        save_file({**load_file(path), **init}, path)
        return pm
    run_both(setup, tmp_path / "o", ["--train_type", "lora", "--lora_rank", 4, "--lora_alpha", 8, "--lora_dropout", 0,
                                     "--target_modules", "q_proj,up_proj"], prepare, embed_row0=T - 64)
