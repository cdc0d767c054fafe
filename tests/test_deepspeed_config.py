"""--deepspeed FILE.json (issue 22, item 1; docs/training.md "DeepSpeed config files"): the configs ms-swift ships
(swift/llm/ds_config/zero2.json, zero3.json, zero3_offload.json: the same keys and values, written here) train
exactly as the stage names do; explicit values set the options, a value against a flag is an error naming both;
offload and fp16 are errors with the reason; unknown keys a warning naming them; the file joins the start-up
agreement."""
import json

import pytest

from omni_run import logs, run, sft, tiny_slam, weights
from test_agreement import base, mpmd
from test_input_checks import parse_error

FP16 = {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16, "hysteresis": 2,
        "min_loss_scale": 1}
TAIL = {"gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 2000,
        "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": False}
OPTIM = {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}}
ZERO2 = {"fp16": FP16, "bf16": {"enabled": "auto"}, "optimizer": OPTIM,
         "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto", "warmup_min_lr": "auto",
                                                           "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
         "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "none", "pin_memory": True},
                               "allgather_partitions": True, "allgather_bucket_size": 2e8, "overlap_comm": True,
                               "reduce_scatter": True, "reduce_bucket_size": 2e8, "contiguous_gradients": True}, **TAIL}
ZERO3_KEYS = {"overlap_comm": True, "contiguous_gradients": True, "sub_group_size": 1e9, "reduce_bucket_size": "auto",
              "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
              "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
              "stage3_gather_16bit_weights_on_model_save": True}
ZERO3 = {"fp16": FP16, "bf16": {"enabled": "auto"},
         "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "none", "pin_memory": True},
                               "offload_param": {"device": "none", "pin_memory": True}, **ZERO3_KEYS,
                               "zero_quantized_weights": False, "zero_quantized_gradients": False}, **TAIL}
ZERO3_OFFLOAD = {"fp16": FP16, "bf16": {"enabled": "auto"}, "optimizer": OPTIM, "scheduler": ZERO2["scheduler"],
                 "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "none", "pin_memory": True},
                                       "offload_param": {"device": "cpu", "pin_memory": True}, **ZERO3_KEYS}, **TAIL}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_slam(tmp_path_factory, "ds", 4)


def write(path, cfg):
    path.write_text(json.dumps(cfg, indent=4))
    return str(path)


def run2(tiny, out, ds, *extra):
    return sft(str(tiny / "model"), str(tiny / "data.jsonl"), str(out), 2,
               ["--deepspeed", ds, "--gradient_accumulation_steps", 2, *extra], np_=2)


@pytest.mark.parametrize("name,cfg", [("zero2", ZERO2), ("zero3", ZERO3)])
def test_ms_swift_configs_train_as_the_stage_names(tiny, tmp_path, name, cfg):
    f = write(tmp_path / f"{name}.json", cfg)
    p = run2(tiny, tmp_path / "file", f)
    run2(tiny, tmp_path / "name", name)
    got, want = logs(tmp_path / "file"), logs(tmp_path / "name")
    for g, w in zip(got, want):
        for k in ("loss", "grad_norm", "learning_rate"):
            assert g[k] == w[k], (k, g, w)
    wf, wn = weights(str(tmp_path / "file" / "final_model")), weights(str(tmp_path / "name" / "final_model"))
    assert all((wf[k] == wn[k]).all() for k in wn)
    stage = int(name[-1])
    assert f"--deepspeed {f}: ZeRO stage {stage}, micro-batch 1, accumulation 2, gradient clipping 1, float32" in p.stderr
    assert "accepted, no effect here" in p.stderr and "zero_optimization.overlap_comm" in p.stderr
    assert "WARNING" not in p.stderr, p.stderr
    args = json.load(open(tmp_path / "file" / "args.json"))
    assert args["zero_stage"] == stage and args["deepspeed"].startswith(f + " (content fnv1a64 ")


def test_explicit_values_set_the_options(tiny, tmp_path):
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "gradient_clipping": 0.5,
           "train_batch_size": 4, "bf16": {"enabled": True}, "zero_optimization": {"stage": 1},
           "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.01}}}
    m, d = str(tiny / "model"), str(tiny / "data.jsonl")
    sft(m, d, str(tmp_path / "file"), 1, ["--deepspeed", write(tmp_path / "ds.json", cfg)])
    sft(m, d, str(tmp_path / "flags"), 1, ["--per_device_train_batch_size", 2, "--gradient_accumulation_steps", 2,
                                           "--max_grad_norm", 0.5, "--torch_dtype", "bf16", "--zero_stage", 1,
                                           "--learning_rate", 3e-4, "--adam_beta1", 0.8, "--adam_beta2", 0.95,
                                           "--adam_epsilon", 1e-6, "--weight_decay", 0.01])
    a, b = (json.load(open(tmp_path / o / "args.json")) for o in ("file", "flags"))
    for k in set(a) | set(b):
        if k not in ("deepspeed", "output_dir", "resolved"):
            assert a[k] == b[k], (k, a[k], b[k])
    assert logs(tmp_path / "file")[0]["loss"] == logs(tmp_path / "flags")[0]["loss"]


@pytest.mark.parametrize("cfg,flags,want", [
    ({"train_micro_batch_size_per_gpu": 4}, ["--per_device_train_batch_size", "2"],
     '"train_micro_batch_size_per_gpu" is 4 but --per_device_train_batch_size is 2'),
    ({"gradient_clipping": 0.5}, ["--max_grad_norm", "2"], '"gradient_clipping" is 0.5 but --max_grad_norm is 2'),
    ({"zero_optimization": {"stage": 3}}, ["--zero_stage", "2"], '"stage" is 3 but --zero_stage is 2'),
    ({"bf16": {"enabled": True}}, ["--torch_dtype", "float32"],
     '"bf16.enabled" true asks for --torch_dtype bfloat16 but --torch_dtype is float32'),
    ({"fp16": {"enabled": True}}, [], '"fp16.enabled" true: fp16 mixed precision (with its dynamic loss scaling) is not implemented'),
    (ZERO3_OFFLOAD, [], '"zero_optimization.offload_param.device" is \'cpu\': offloading is not implemented'),
    ({"zero_optimization": {"offload_optimizer": {"device": "nvme"}}}, [],
     '"zero_optimization.offload_optimizer.device" is \'nvme\': offloading is not implemented'),
    ({"optimizer": {"type": "Lamb"}}, [], "omnishard's optimizer is AdamW"),
    ({"scheduler": {"type": "OneCycle"}}, [], '"scheduler.type": expected WarmupDecayLR (linear)'),
    ({"scheduler": {"type": "WarmupCosineLR"}}, ["--lr_scheduler_type", "linear"],
     '"scheduler.type" asks for --lr_scheduler_type cosine but --lr_scheduler_type is linear'),
])
def test_a_value_against_a_flag_or_not_implemented_is_an_error(tmp_path, cfg, flags, want):
    f = write(tmp_path / "ds.json", cfg)
    err = parse_error(tmp_path, "--deepspeed", f, *flags)
    assert f"{f}: {want}" in err or want in err, err
    assert "nomodel" not in err


def test_train_batch_size_is_checked_against_the_ranks(tiny, tmp_path):
    f = write(tmp_path / "ds.json", {"train_batch_size": 8, "train_micro_batch_size_per_gpu": "auto"})
    p = sft(str(tiny / "model"), str(tiny / "data.jsonl"), str(tmp_path / "o"), 1,
            ["--deepspeed", f, "--per_device_train_batch_size", 2], np_=2, check=False)
    assert p.returncode != 0
    assert ('"train_batch_size" is 8 but --per_device_train_batch_size 2 x --gradient_accumulation_steps 1 x 2 rank(s) = 4'
            in p.stderr), p.stderr


def test_unknown_keys_are_named(tmp_path):
    f = write(tmp_path / "ds.json", {"activation_checkpointing": {"partition_activations": False},
                                     "zero_optimization": {"stage": 2, "ignore_unused_parameters": True}})
    err = parse_error(tmp_path, "--deepspeed", f)
    assert (f"WARNING: --deepspeed {f}: keys omnishard does not know, ignored: zero_optimization.ignore_unused_parameters, "
            "activation_checkpointing") in err, err


@pytest.mark.parametrize("name,stage", [("default-zero2", 2), ("default-zero3", 3), ("zero1", 1)])
def test_stage_names(tmp_path, name, stage):
    assert "nomodel/config.json" in parse_error(tmp_path, "--deepspeed", name)


@pytest.mark.parametrize("bad,want", [("zero3_offload", "--deepspeed zero3_offload: offloading is not implemented"),
                                      ("zero4", "--deepspeed: expected zero0, zero1, zero2, zero3, default-zero2, "
                                                "default-zero3 or a DeepSpeed JSON config file, got 'zero4'")])
def test_bad_names(tmp_path, bad, want):
    assert want in parse_error(tmp_path, "--deepspeed", bad)


def test_the_file_joins_the_agreement(tiny, tmp_path):
    """the same relative path, another content on rank 1 (its own working directory)"""
    d0, d1 = tmp_path / "r0", tmp_path / "r1"
    d0.mkdir(), d1.mkdir()
    write(d0 / "ds.json", ZERO2)
    write(d1 / "ds.json", dict(ZERO2, steps_per_print=10))
    p = mpmd([(base(tiny) + ["--deepspeed", "ds.json"], d0), (base(tiny) + ["--deepspeed", "ds.json"], d1)])
    assert p.returncode != 0
    assert "ranks disagree on --deepspeed: rank 0 has 'ds.json (content fnv1a64 " in p.stderr, p.stderr


@pytest.mark.parametrize("text,want", [
    ('{"zero_optimization": {"stage": 3, "stage": 0}}', 'key "stage" is given twice in "zero_optimization": 3, then 0'),
    ('{"stage": 3, "stage": 0}', 'key "stage" is given twice in the top level: 3, then 0'),
    ('{"zero_optimization": {"stage": 2}} {"zero_optimization": {"stage": 3}}',
     "content after the JSON value, at byte 36"),
    ('{"zero_optimization": {"stage": 2}}\n\0', "a NUL byte at byte 36"),
])
def test_duplicate_keys_and_trailing_content_are_refused(tmp_path, text, want):
    """JSON leaves a key given twice undefined: cJSON took the first, DeepSpeed's Python reader takes the last, so the
    two would run different configurations; refused naming the key and both values, as is anything after the object"""
    f = tmp_path / "ds.json"
    f.write_bytes(text.encode())
    err = parse_error(tmp_path, "--deepspeed", str(f))
    assert f"{f}: {want}" in err, err


def test_a_file_past_the_bound_is_refused_unread(tmp_path):
    """/dev/zero (endless) and a 2 MB file: refused by size, not read into memory"""
    err = parse_error(tmp_path, "--deepspeed", "/dev/zero")
    assert "/dev/zero: more than 1048576 bytes; a JSON configuration file is at most that" in err, err
    f = tmp_path / "big.json"
    f.write_text('{"x": "' + "a" * 2000000 + '"}')
    err = parse_error(tmp_path, "--deepspeed", str(f))
    assert f"{f}: 2000009 bytes; a JSON configuration file is at most 1048576 bytes" in err, err


def plan_table(*args):
    return run(["plan", "--model", "qwen2.5-0.5b", "--nproc", 4, *args], timeout=60)


@pytest.mark.parametrize("name,cfg", [("zero2", ZERO2), ("zero3", ZERO3)])
def test_plan_takes_a_deepspeed_file_as_sft_does(tmp_path, name, cfg):
    """an sft line with --deepspeed zero3.json plans as it is: ms-swift's file plans as its stage name does; the file's
    micro-batch and bf16 are the plan's; a stage against --zero_stage is refused as sft refuses it"""
    f = write(tmp_path / f"{name}.json", cfg)
    p = plan_table("--deepspeed", f)
    assert p.stdout == plan_table("--deepspeed", name).stdout, p.stdout
    assert f"--deepspeed {f}: ZeRO stage {name[-1]}, micro-batch 1" in p.stderr, p.stderr
    g = write(tmp_path / "set.json", dict(cfg, train_micro_batch_size_per_gpu=4, bf16={"enabled": True}))
    assert (plan_table("--deepspeed", g).stdout ==
            plan_table("--deepspeed", name, "--per_device_train_batch_size", 4, "--torch_dtype", "bfloat16").stdout)
    other = "2" if name == "zero3" else "3"
    bad = run(["plan", "--model", "qwen2.5-0.5b", "--deepspeed", f, "--zero_stage", other], check=False, timeout=60)
    assert bad.returncode != 0 and f'"stage" is {name[-1]} but --zero_stage is {other}' in bad.stderr, bad.stderr


def test_plan_with_a_deepspeed_file_without_a_stage_shows_the_stages(tmp_path):
    """a file that names no ZeRO stage leaves it to the flags: plan's --zero_stage list (default every stage)"""
    f = write(tmp_path / "auto.json", {"zero_optimization": {"overlap_comm": True}, **TAIL})
    assert plan_table("--deepspeed", f).stdout == plan_table().stdout
    assert plan_table("--deepspeed", f, "--zero_stage", 1).stdout == plan_table("--zero_stage", 1).stdout
