"""--train_type lora against PEFT's LoRA (docs/training.md "LoRA"): loss, LoRA gradients and weights after 3 steps
with the new embedding rows and the adapter trained as modules_to_save; the PEFT adapter directory loads with
PeftModel.from_pretrained, the merged export equals PEFT's merge_and_unload; N ranks == 1 rank at ZeRO 0-3 with
dropout; PEFT's initialisation."""
import json, os, shutil
import numpy as np
import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict
from safetensors.numpy import load_file
from safetensors.torch import save_file, load_file as load_torch
from transformers import AutoModelForCausalLM

from oracle import slam_omni_ref as ref
from omni_run import sft, logs, weights, rel, run

T, A, R, ALPHA = 192, 80, 4, 8.0
COMMON = ["--learning_rate", "1e-3", "--weight_decay", "0.1", "--lr_scheduler_type", "cosine", "--warmup_steps", "1",
          "--max_length", "32", "--save_steps", "0", "--train_type", "lora", "--lora_rank", R, "--lora_alpha", ALPHA]


def peft_name(n):   # PEFT's in-memory name -> omnishard's registry name
    return n.replace("base_model.model.", "", 1).replace(".default.", ".")


def plant_lora(pm, path, seed, metadata=None):
    """Non-zero LoRA matrices (PEFT starts B at 0, which would hide the A gradients), set in the PEFT model and
    written to the model file under omnishard's names, so both sides start from the same factors."""
    torch.manual_seed(seed)
    init = {}
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_" in n:
                p.copy_(0.2 * torch.randn_like(p))
                init[peft_name(n)] = p.detach().clone()
    save_file({**load_torch(path), **init}, path, metadata=metadata)


def setup(tmp_path, targets, tied=True, seed=0):
    """Model dir + data + the PEFT model; random LoRA A and B (B non-zero so that A gets a gradient at step 1) are
    written into slam_omni.safetensors, where omnishard reads them as its starting point."""
    mdir, data = str(tmp_path / "model"), str(tmp_path / "data.jsonl")
    model, adapter = ref.make_model(mdir, T=T, A=A, G=3, tied=tied, seed=seed)
    ref.make_data(data, 7, G=3, T=T, A=A)
    pm = get_peft_model(model, LoraConfig(r=R, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=targets))
    plant_lora(pm, os.path.join(mdir, "slam_omni.safetensors"), seed=7)
    return mdir, data, pm, adapter


MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix64(z):
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def rng_uniform(key, n):
    """os_rng_uniform(key, 0..n-1) of src/core/rng.c, vectorised"""
    with np.errstate(over="ignore"):
        z = _mix64(np.uint64(key)) + (np.arange(n, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    return (_mix64(z) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


class CounterDropout(torch.nn.Module):
    """PEFT's lora_dropout replaced by omnishard's masks (docs/training.md "LoRA"): element (row, i) of module t in
    layer l at optimizer step s (1 rank, one micro-batch per step: global micro-batch 0) is kept when value row*I+i of
    stream rng_u64(rng_u64(rng_u64(seed ^ 0x10AD0D0F, s), 0), l*7+t) is >= p."""
    def __init__(self, p, l, t, step):
        super().__init__()
        self.p, self.l, self.t, self.step = np.float32(p), l, t, step

    def forward(self, x):
        if not self.training:
            return x
        key = ref.rng_u64(ref.rng_u64(ref.rng_u64(42 ^ 0x10AD0D0F, self.step[0]), 0), self.l * 7 + self.t)
        keep = rng_uniform(key, x.numel()) >= float(self.p)
        mask = torch.from_numpy(keep.reshape(x.shape)).to(x.dtype)
        return x * mask * torch.tensor(np.float32(1) / (np.float32(1) - self.p))


@pytest.mark.parametrize("targets,tied,p", [("all-linear", True, 0.0), ("q_proj,v_proj,down_proj", False, 0.0),
                                            ("all-linear", True, 0.3)])
def test_lora_matches_peft(tmp_path, targets, tied, p):
    names = MODULES if targets == "all-linear" else targets.split(",")
    mdir, data, pm, adapter = setup(tmp_path, names, tied)
    if p > 0:   # the same masks as omnishard's counter RNG (PyTorch's own RNG is not reproduced)
        step = [0]
        pm.get_base_model().register_forward_pre_hook(lambda *_: step.__setitem__(0, step[0] + 1))
        for n, mod in pm.named_modules():
            if hasattr(mod, "lora_dropout") and "default" in mod.lora_dropout:
                mod.lora_dropout["default"] = CounterDropout(p, int(n.split(".layers.")[1].split(".")[0]),
                                                             MODULES.index(n.rsplit(".", 1)[1]), step)
    out = tmp_path / "out"
    sft(mdir, data, out, 3, [*COMMON, "--target_modules", targets, "--lora_dropout", p, "--merge_lora", "false",
                             "--dump_grads", str(tmp_path / "g.safetensors")])
    # PEFT: LoRA trained; the new embedding rows (and untied lm_head's) and the adapter as modules_to_save
    base = pm.get_base_model()
    base.get_input_embeddings().weight.requires_grad_(True)
    if not tied:
        base.get_output_embeddings().weight.requires_grad_(True)
    rlogs, rgrads, rfinal = ref.train(pm, adapter, ref.load_data(data, 32), G=3, T=T, A=A, steps=3, lr=1e-3, wd=0.1,
                                      sched="cosine", warmup=1, embed_row0=T - 64)
    rgrads = {peft_name(k): v for k, v in rgrads.items()}
    rfinal = {peft_name(k): v for k, v in rfinal.items()}
    for cl, rl in zip(logs(out), rlogs):
        for k in ("loss", "grad_norm", "text_loss", "audio_loss_0"):
            assert abs(cl[k] - rl[k]) <= 1e-5 * abs(rl[k]), (k, cl[k], rl[k])
    cg = load_file(str(tmp_path / "g.safetensors"))
    assert set(cg) == set(rgrads), set(cg) ^ set(rgrads)
    assert sum("lora_A" in k for k in cg) == 2 * len(names)   # (2 layers)
    for k, g in rgrads.items():
        assert rel(cg[k], g.numpy()) <= 1e-4, (k, rel(cg[k], g.numpy()))
    # the adapter directory: PEFT's own names and values, loadable with PeftModel.from_pretrained
    fm = out / "final_model"
    ad = load_file(str(fm / "lora_adapter" / "adapter_model.safetensors"))
    want = {k: v for k, v in get_peft_model_state_dict(pm).items() if "lora_" in k}
    assert set(ad) == set(want), set(ad) ^ set(want)
    for k, v in want.items():
        assert rel(ad[k], v.numpy()) <= 1e-4, (k, rel(ad[k], v.numpy()))
    cw = weights(fm)   # the base: frozen LLM weights + trained embedding rows and adapter
    for k, w in rfinal.items():
        if "lora_" not in k:
            assert rel(cw[k], w.numpy()) <= 1e-4, (k, rel(cw[k], w.numpy()))
    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(fm)), str(fm / "lora_adapter")).eval()
    ids = torch.tensor([[3, 17, T + 5, T + 60, 40]])
    with torch.no_grad():
        got, exp = loaded(input_ids=ids).logits, pm.eval()(input_ids=ids).logits
    assert rel(got.numpy(), exp.numpy()) <= 1e-5
    # merged export from the checkpoint: transformers loads it unchanged and it equals PEFT's merge_and_unload
    run(["export", "--checkpoint", out / "checkpoint-3", "--output_dir", tmp_path / "merged"])
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged")).eval()
    mref = pm.merge_and_unload()
    for k, v in mref.state_dict().items():
        assert rel(merged.state_dict()[k].numpy(), v.numpy()) <= 1e-5, k
    assert not any("lora" in k for k in load_file(str(tmp_path / "merged" / "model.safetensors")))


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_lora_n_ranks_equal_one_rank_with_dropout(tmp_path, stage):
    mdir, data, _, _ = setup(tmp_path, MODULES)
    flags = [*COMMON, "--lora_dropout", 0.3, "--merge_lora", "false"]
    sft(mdir, data, tmp_path / "one", 3, [*flags, "--gradient_accumulation_steps", 2])
    sft(mdir, data, tmp_path / "two", 3, [*flags, "--zero_stage", stage], np_=2)
    a, b = logs(tmp_path / "two"), logs(tmp_path / "one")
    for x, y in zip(a, b):
        assert abs(x["loss"] - y["loss"]) <= 1e-6 * abs(y["loss"]), (x, y)
    for f in ("model.safetensors", "lora_adapter/adapter_model.safetensors"):
        wa, wb = load_file(str(tmp_path / "two" / "final_model" / f)), load_file(str(tmp_path / "one" / "final_model" / f))
        for k in wb:
            assert rel(wa[k], wb[k]) <= 1e-5, (k, rel(wa[k], wb[k]))


def test_lora_dropout_and_init(tmp_path):
    """Dropout is applied (it changes the loss when B != 0); a model without LoRA weights starts from PEFT's
    initialisation: lora_B zero, lora_A uniform(+-1/sqrt(in))."""
    sd, sdata, _, _ = setup(tmp_path / "s", ["q_proj", "v_proj"])
    for p in (0, 0.3):
        sft(sd, sdata, tmp_path / f"s{p}", 1, [*COMMON, "--target_modules", "q_proj,v_proj", "--lora_dropout", p])
    assert logs(tmp_path / "s0")[0]["loss"] != logs(tmp_path / "s0.3")[0]["loss"]
    mdir, data = str(tmp_path / "model"), str(tmp_path / "data.jsonl")
    ref.make_model(mdir, T=T, A=A, G=3, tied=True)
    ref.make_data(data, 7, G=3, T=T, A=A)
    args = [*COMMON, "--learning_rate", "0", "--merge_lora", "false"]
    sft(mdir, data, tmp_path / "p0", 1, [*args, "--lora_dropout", 0])
    sft(mdir, data, tmp_path / "p5", 1, [*args, "--lora_dropout", 0.5])
    ad = load_file(str(tmp_path / "p0" / "final_model" / "lora_adapter" / "adapter_model.safetensors"))
    for k, v in ad.items():
        if "lora_B" in k:
            assert not v.any(), k
        else:
            bound = 1 / np.sqrt(v.shape[1])
            assert np.abs(v).max() <= bound and np.abs(v).max() > 0.5 * bound, k
    # B = 0: the LoRA term is zero whatever the mask, so dropout cannot change the step-1 loss
    assert logs(tmp_path / "p0")[0]["loss"] == logs(tmp_path / "p5")[0]["loss"]
    cfg = json.load(open(tmp_path / "p5" / "final_model" / "lora_adapter" / "adapter_config.json"))
    assert cfg["r"] == R and cfg["lora_alpha"] == ALPHA and cfg["lora_dropout"] == 0.5 and len(cfg["target_modules"]) == 7


def test_plan_lora():
    """plan with --train_type lora counts LoRA (r 8, all-linear), the adapter and the new rows as trained, and
    gradients / moments for those only (Qwen2.5-0.5B: hidden 896, kv 128, MLP 4864, 24 layers, tied)."""
    out = run(["plan", "--model", "qwen2.5-0.5b", "--zero_stage", 0, "--gradient_checkpointing", "true",
               "--train_type", "lora"]).stdout
    C, KV, F, r = 896, 128, 4864, 8
    lora = 24 * r * ((C + C) + 2 * (C + KV) + (C + C) + 2 * (C + F) + (F + C))
    trained = lora + 3 * 4160 * 4160 + 3 * 4160 + (156160 - 151936) * C
    assert f"{trained / 1e9:.3f}B trained" in out, out
    row = [l.split() for l in out.splitlines() if l.split()[:1] == ["0"]][0]
    assert abs(float(row[4]) - 8 * trained / 1e9) <= 2e-3, row


def test_lora_resume_is_bitwise(tmp_path):
    """A LoRA checkpoint (its slam_omni.json records the LoRA) resumes bitwise on 2 ranks at ZeRO-3."""
    mdir, data, _, _ = setup(tmp_path, MODULES)
    flags = [*COMMON, "--deepspeed", "zero3", "--save_steps", 2]
    sft(mdir, data, tmp_path / "full", 4, flags, np_=2)
    cfg = json.load(open(tmp_path / "full" / "checkpoint-2" / "slam_omni.json"))
    assert (cfg["lora_rank"], cfg["lora_alpha"], cfg["lora_dropout"]) == (R, ALPHA, 0.05)
    sft(mdir, data, tmp_path / "res", 4, [*flags, "--resume_from_checkpoint", tmp_path / "full" / "checkpoint-2"], np_=2)
    assert [x["loss"] for x in logs(tmp_path / "full")[2:]] == [x["loss"] for x in logs(tmp_path / "res")]
    wa, wb = weights(tmp_path / "full" / "final_model"), weights(tmp_path / "res" / "final_model")
    for k in wa:
        assert np.array_equal(wa[k], wb[k]), k


def test_recomputation_and_adapter_directory_refused(tmp_path):
    """LoRA with and without recomputation (dropout masks regenerated) gives the same run; a base + adapter export is
    refused as --model (omnishard would not apply the adapter)."""
    mdir, data, _, _ = setup(tmp_path, MODULES)
    flags = [*COMMON, "--lora_dropout", 0.2, "--merge_lora", "false"]
    sft(mdir, data, tmp_path / "rc", 2, flags)
    sft(mdir, data, tmp_path / "no", 2, [*flags, "--gradient_checkpointing", "false"])
    for x, y in zip(logs(tmp_path / "rc"), logs(tmp_path / "no")):
        assert abs(x["loss"] - y["loss"]) <= 1e-6 * abs(y["loss"]), (x, y)
    f = "final_model/lora_adapter/adapter_model.safetensors"
    wa, wb = load_file(str(tmp_path / "rc" / f)), load_file(str(tmp_path / "no" / f))
    for k in wa:
        assert rel(wa[k], wb[k]) <= 1e-5, k
    p = sft(tmp_path / "rc" / "final_model", data, tmp_path / "x", 1, COMMON, check=False)
    assert p.returncode != 0 and "carries a PEFT LoRA adapter" in p.stderr, p.stderr
    # so is a checkpoint's loadable copy without its manifest (the adapter beside the base, as ms-swift's)
    ck = sorted((tmp_path / "rc").glob("checkpoint-*"))[-1]
    shutil.copytree(ck, tmp_path / "copy", ignore=shutil.ignore_patterns("manifest.json", "rank-*"))
    p = sft(tmp_path / "copy", data, tmp_path / "y", 1, COMMON, check=False)
    assert p.returncode != 0 and "carries a PEFT LoRA adapter (adapter_config.json)" in p.stderr, p.stderr


def test_lora_plain_qwen2_matches_peft(tmp_path):
    """--model_type qwen2 (G = 0) with LoRA: only the LoRA matrices train (no new rows); the LoRA weights start from
    model.safetensors; 2 ranks at ZeRO-2 against PEFT; export from the checkpoint, merged and as an adapter."""
    V = 200
    mdir, data = str(tmp_path / "model"), str(tmp_path / "data.jsonl")
    model, _ = ref.make_model(mdir, T=V, A=A, G=0, tied=True)
    ref.make_data(data, 8, G=0, T=V, A=A)
    pm = get_peft_model(model, LoraConfig(r=R, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=["k_proj", "o_proj"]))
    plant_lora(pm, os.path.join(mdir, "model.safetensors"), seed=3, metadata={"format": "pt"})
    out = tmp_path / "out"
    sft(mdir, data, out, 3, [*COMMON, "--model_type", "qwen2", "--target_modules", "k_proj,o_proj", "--lora_dropout", 0,
                             "--zero_stage", 2, "--save_steps", 3], np_=2)
    rlogs, _, rfinal = ref.train(pm, None, ref.load_data(data, 32), G=0, T=V, A=A, steps=3, lr=1e-3, wd=0.1,
                                 sched="cosine", warmup=1, accum=2)
    for cl, rl in zip(logs(out), rlogs):
        assert abs(cl["loss"] - rl["loss"]) <= 1e-5 * abs(rl["loss"]), (cl["loss"], rl["loss"])
    assert set(rfinal) == {k for k in rfinal if "lora_" in k}
    run(["export", "--checkpoint", out / "checkpoint-3", "--output_dir", tmp_path / "ad", "--merge_lora", "false"])
    ad = load_file(str(tmp_path / "ad" / "lora_adapter" / "adapter_model.safetensors"))
    for k, v in get_peft_model_state_dict(pm).items():
        assert rel(ad[k], v.numpy()) <= 1e-4, k
    merged = AutoModelForCausalLM.from_pretrained(str(out / "final_model"))
    for k, v in pm.merge_and_unload().state_dict().items():
        assert rel(merged.state_dict()[k].numpy(), v.numpy()) <= 1e-5, k
