"""Every checkpoint-N/ loads in transformers (and, under LoRA, in PEFT) as ms-swift's does (docs/training.md "Saved
models"): the consolidated model beside the rank files, its logits equal to `omnishard export`'s of the same
checkpoint; sharded above --max_shard_size with transformers' index; listed in the manifest (a changed shard is
refused on resume), removed with its checkpoint by --save_total_limit; resume unchanged; --save_consolidated false and
DeepSpeed's stage3_gather_16bit_weights_on_model_save false keep only the rank files; the saved dtype (--save_dtype,
default the base's torch_dtype) rounds as torch does."""
import json, os, shutil
import numpy as np
import pytest
import torch
from peft import PeftModel
from safetensors import safe_open
from safetensors.numpy import load_file
from transformers import AutoModelForCausalLM

from oracle import slam_omni_ref as ref
from omni_run import sft, run, logs, weights

T, A = 192, 80
ARGS = ["--learning_rate", "1e-2", "--max_length", "64", "--save_steps", "1"]


def model_and_data(tmp_path, dtype=None):
    mdir, data = tmp_path / "model", tmp_path / "data.jsonl"
    ref.make_model(str(mdir), hidden=32, layers=2, heads=4, kv_heads=2, inter=64, T=T, A=A, G=3, tied=False, ckpt_vocab=150)
    ref.make_data(str(data), 4, G=3, T=T, A=A)
    (mdir / "tokenizer_config.json").write_text('{"model_max_length": 512}')   # copied into every checkpoint
    if dtype:   # the base's torch_dtype (the weights stay F32: omnishard reads either)
        cfg = json.load(open(mdir / "config.json"))
        cfg["dtype"] = cfg["torch_dtype"] = dtype
        json.dump(cfg, open(mdir / "config.json", "w"))
    return mdir, data


def logits(d, ids, adapter=None):
    m = AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float32, attn_implementation="eager")
    if adapter:
        m = PeftModel.from_pretrained(m, str(adapter))
    with torch.no_grad():
        return m.eval()(input_ids=torch.tensor([ids])).logits[0].numpy()


IDS = [3, 17, 150, 191, T + 5, T + 60, 40]   # text ids (new rows 150.. included) and audio ids


def files(d):
    return {os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs}


def test_checkpoint_loads_in_transformers_sharded_and_resumes(tmp_path):
    mdir, data = model_and_data(tmp_path)
    out = tmp_path / "o"
    sft(mdir, data, out, 3, [*ARGS, "--deepspeed", "zero3", "--max_shard_size", "40KB"], np_=2)
    ck = out / "checkpoint-2"
    have = files(ck)
    shards = sorted(f for f in have if f.startswith("model-"))
    assert len(shards) > 1 and "model.safetensors" not in have, have
    assert {"config.json", "tokenizer_config.json", "slam_omni.json", "slam_omni.safetensors",
            "model.safetensors.index.json", "rank-00000.safetensors", "rank-00001.safetensors"} <= have, have
    index = json.load(open(ck / "model.safetensors.index.json"))
    assert sorted(set(index["weight_map"].values())) == shards
    for s in shards:   # transformers' limit: a shard passes it only when one tensor alone does
        assert os.path.getsize(ck / s) <= 40000 + 4 * 192 * 32 + 4096 or len(load_file(str(ck / s))) == 1, s
    # the manifest covers the new files
    listed = {f["name"] for f in json.load(open(ck / "manifest.json"))["model_files"]}
    assert set(shards) | {"model.safetensors.index.json", "slam_omni.safetensors", "config.json"} <= listed, listed
    # transformers loads it; its logits are those of omnishard export's model from the same checkpoint
    run(["export", "--checkpoint", ck, "--output_dir", tmp_path / "exp"])
    got, want = logits(ck, IDS), logits(tmp_path / "exp", IDS)
    assert np.array_equal(got, want)
    assert json.load(open(ck / "config.json"))["vocab_size"] == T + A
    we, wc = weights(tmp_path / "exp"), load_file(str(ck / "slam_omni.safetensors"))
    for k, v in wc.items():
        assert np.array_equal(v, we[k]), k
    # resume from it (the consolidated copy changes nothing): the same losses as the run that went on
    sft(mdir, data, tmp_path / "r", 3, [*ARGS, "--deepspeed", "zero3", "--resume_from_checkpoint", ck], np_=2)
    assert [x["loss"] for x in logs(out)[2:]] == [x["loss"] for x in logs(tmp_path / "r")]
    # a changed shard is refused (the manifest's checksum), naming the file
    with open(ck / shards[0], "r+b") as f:
        f.seek(-1, 2)
        b = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([b[0] ^ 1]))
    p = sft(mdir, data, tmp_path / "bad", 3, [*ARGS, "--resume_from_checkpoint", ck], check=False)
    assert p.returncode != 0 and shards[0] in p.stderr and "do not match the manifest" in p.stderr, p.stderr


def test_lora_checkpoint_loads_in_peft_with_absolute_base(tmp_path):
    mdir, data = model_and_data(tmp_path)
    out = tmp_path / "o"
    lora = ["--train_type", "lora", "--lora_rank", 4, "--lora_alpha", 8, "--lora_dropout", 0]
    sft(mdir, data, out, 2, [*ARGS, *lora, "--save_total_limit", 1], np_=2)
    assert not (out / "checkpoint-1").exists()   # retention removes the whole directory, model files included
    ck = out / "checkpoint-2"
    cfg = json.load(open(ck / "adapter_config.json"))   # ms-swift's place: the top of checkpoint-N
    assert cfg["base_model_name_or_path"] == os.path.realpath(ck)   # absolute: the checkpoint's own base
    assert cfg["r"] == 4 and cfg["lora_alpha"] == 8
    listed = {f["name"] for f in json.load(open(ck / "manifest.json"))["model_files"]}
    assert {"adapter_config.json", "adapter_model.safetensors", "model.safetensors"} <= listed
    assert not (ck / "lora_adapter").exists()   # one adapter only: nothing to apply twice
    assert not any("lora" in k for k in load_file(str(ck / "model.safetensors")))
    run(["export", "--checkpoint", ck, "--output_dir", tmp_path / "merged"])
    want = logits(tmp_path / "merged", IDS)
    # transformers alone (PEFT installed) loads the checkpoint as base + adapter: the merged export's logits
    got = logits(ck, IDS)
    assert np.abs(got - want).max() <= 1e-5 * max(1.0, np.abs(want).max())
    # PEFT's way: the adapter directory is the checkpoint itself, over its base (a copy without the adapter)
    base = tmp_path / "base"
    base.mkdir()
    for f in ("config.json", "model.safetensors"):
        shutil.copy(ck / f, base / f)
    plain, peft = logits(base, IDS), logits(base, IDS, ck)
    assert np.abs(peft - want).max() <= 1e-5 * max(1.0, np.abs(want).max())
    assert np.abs(plain - want).max() > 1e-3   # the adapter was trained: the base alone differs
    # omnishard still reads the checkpoint itself (its LoRA from the rank files), for infer and resume
    sft(mdir, data, tmp_path / "r", 3, [*ARGS, *lora, "--resume_from_checkpoint", ck], np_=2)


@pytest.mark.parametrize("how", ["flag", "deepspeed"])
def test_consolidated_copy_can_be_skipped(tmp_path, how):
    mdir, data = model_and_data(tmp_path)
    if how == "flag":
        extra = ["--save_consolidated", "false"]
    else:
        ds = tmp_path / "zero3.json"
        ds.write_text(json.dumps({"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": False},
                                  "train_micro_batch_size_per_gpu": "auto"}))
        extra = ["--deepspeed", ds]
    sft(mdir, data, tmp_path / "o", 1, [*ARGS, *extra, "--save_only_model", "true"])
    have = files(tmp_path / "o" / "checkpoint-1")
    assert not any(f.startswith("model") and f.endswith(".safetensors") for f in have), have
    assert "slam_omni.safetensors" not in have and "rank-00000.safetensors" in have
    with safe_open(str(tmp_path / "o" / "checkpoint-1" / "rank-00000.safetensors"), "np") as f:
        assert not any(k.startswith("exp_avg") for k in f.keys())   # --save_only_model: no optimizer state
    assert (tmp_path / "o" / "final_model" / "model.safetensors").exists()
    if how == "deepspeed":   # the flag and the file must agree
        p = sft(mdir, data, tmp_path / "x", 1, [*ARGS, *extra, "--save_consolidated", "true"], check=False)
        assert p.returncode != 0 and "stage3_gather_16bit_weights_on_model_save" in p.stderr, p.stderr


@pytest.mark.parametrize("base,flag,tdt", [("bfloat16", None, torch.bfloat16), ("float32", "float16", torch.float16),
                                           ("bfloat16", "float32", torch.float32)])
def test_saved_dtype_rounds_as_torch(tmp_path, base, flag, tdt):
    """final_model and the checkpoint's model in the base's torch_dtype (or --save_dtype's): every tensor is torch's
    rounding of the fp32 weights (omnishard export --save_dtype float32 of the same checkpoint), and the logits stay
    within the dtype's tolerance of the fp32 model's."""
    mdir, data = model_and_data(tmp_path, dtype=base)
    out = tmp_path / "o"
    sft(mdir, data, out, 2, [*ARGS, *(["--save_dtype", flag] if flag else [])])
    run(["export", "--checkpoint", out / "checkpoint-2", "--output_dir", tmp_path / "f32", "--save_dtype", "float32"])
    ref32 = {}
    for d in (tmp_path / "f32",):
        for f in ("model.safetensors", "slam_omni.safetensors"):
            with safe_open(str(d / f), "pt") as h:
                ref32.update({k: h.get_tensor(k) for k in h.keys()})
    name = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}[tdt]
    for d in (out / "final_model", out / "checkpoint-2"):
        assert json.load(open(d / "config.json"))["torch_dtype"] == name
        n = 0
        for f in ("model.safetensors", "slam_omni.safetensors"):
            with safe_open(str(d / f), "pt") as h:
                for k in h.keys():
                    t = h.get_tensor(k)
                    assert t.dtype == tdt, (k, t.dtype)
                    assert torch.equal(t, ref32[k].to(tdt)), k
                    n += 1
        assert n == len(ref32)
    got, want = logits(out / "final_model", IDS), logits(tmp_path / "f32", IDS)
    tol = {torch.bfloat16: 2e-2, torch.float16: 3e-3, torch.float32: 0}[tdt]
    assert np.abs(got - want).max() <= tol * max(1.0, np.abs(want).max()), np.abs(got - want).max()
    # export's default is the checkpoint's own dtype
    run(["export", "--checkpoint", out / "checkpoint-2", "--output_dir", tmp_path / "auto"])
    assert json.load(open(tmp_path / "auto" / "config.json"))["torch_dtype"] == name


def test_save_dtype_refusals(tmp_path):
    mdir, data = model_and_data(tmp_path)
    p = sft(mdir, data, tmp_path / "o", 1, [*ARGS, "--save_dtype", "float64"], check=False)
    assert p.returncode != 0 and "float64" in p.stderr and "bfloat16" in p.stderr, p.stderr
    # a weight float16 cannot hold: the save fails naming the tensor, never an inf in the file
    from safetensors.torch import load_file as lt, save_file
    w = lt(str(mdir / "model.safetensors"))
    w["model.norm.weight"][0] = 1e5
    save_file(w, str(mdir / "model.safetensors"), metadata={"format": "pt"})
    sft(mdir, data, tmp_path / "o2", 1, ["--learning_rate", "0", "--max_length", "64"])
    p = run(["export", "--checkpoint", tmp_path / "o2" / "checkpoint-1", "--output_dir", tmp_path / "e",
             "--save_dtype", "float16"], check=False)
    assert p.returncode != 0 and "model.norm.weight" in p.stderr and "float16" in p.stderr, p.stderr
    assert not (tmp_path / "e").exists()


def test_the_closing_lines_name_the_last_checkpoint_and_how_to_load_it(tmp_path):
    """ms-swift's closing `last_model_checkpoint: DIR`: the directory that exists, and (under LoRA) that
    transformers loads it with the adapter and PEFT takes it as the adapter directory, so a user need not know the
    layout; without the consolidated copy, the export line."""
    import re
    mdir, data = model_and_data(tmp_path)
    out = tmp_path / "o"
    p = sft(mdir, data, out, 2, [*ARGS, "--train_type", "lora", "--lora_rank", 4])
    m = re.search(r"last_model_checkpoint: (\S+) .*from_pretrained\('([^']+)'\).*PeftModel\.from_pretrained\(base, '([^']+)'\)",
                  p.stderr)
    assert m and m.group(1) == m.group(2) == m.group(3) == str(out / "checkpoint-2"), p.stderr
    base = tmp_path / "base"
    base.mkdir()
    for f in ("config.json", "model.safetensors"):
        shutil.copy(out / "checkpoint-2" / f, base / f)
    plain, tuned, peft = logits(base, IDS), logits(m.group(2), IDS), logits(base, IDS, m.group(3))
    assert np.abs(plain - tuned).max() > 1e-3   # the named directory loads with the trained adapter
    assert np.abs(peft - tuned).max() <= 1e-5 * max(1.0, np.abs(tuned).max())
    p = sft(mdir, data, tmp_path / "r", 1, [*ARGS, "--save_consolidated", "false"])
    ck = tmp_path / "r" / "checkpoint-1"
    assert f"last_model_checkpoint: {ck} " in p.stderr and f"omnishard export --checkpoint {ck}" in p.stderr, p.stderr
