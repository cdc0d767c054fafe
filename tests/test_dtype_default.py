"""The default training precision is the model's own (--torch_dtype auto), as ms-swift's default torch_dtype: a
model whose config.json says bfloat16 trains in bf16 mixed precision, any other in fp32, and one start-up line says
which and why, naming the flag that overrides it. plan plans what sft runs. docs/training.md "bf16 mixed precision".

The invariants: the default run equals the same run with the precision given explicitly (bit for bit), and the two
precisions really differ."""
import json

import pytest

from oracle import slam_omni_ref as ref
from omni_run import sft, run, logs

MODEL = dict(hidden=32, layers=1, heads=4, kv_heads=2, inter=64, T=192, A=80, G=3, tied=True)
ARGS = ["--learning_rate", "1e-2", "--max_length", "16", "--save_steps", "100", "--save_consolidated", "false"]


def model_dir(d, dtype):
    m = d / f"model-{dtype}"
    if not m.exists():
        ref.make_model(str(m), **MODEL)
        cfg = json.load(open(m / "config.json"))
        cfg["torch_dtype"] = dtype   # the weights stay F32: omnishard reads either
        cfg.pop("dtype", None)
        json.dump(cfg, open(m / "config.json", "w"))
    return m


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    d = tmp_path_factory.mktemp("dtype")
    ref.make_data(str(d / "data.jsonl"), 4, G=3, T=192, A=80)
    return d


def train(d, dtype, name, extra=()):
    out = d / name
    p = sft(model_dir(d, dtype), d / "data.jsonl", out, 2, [*ARGS, *extra])
    losses = [l["loss"] for l in logs(out)]
    resolved = json.load(open(out / "args.json"))["torch_dtype"]   # the options as the run settled them
    lines = [l for l in p.stderr.splitlines() if ": precision: " in l]
    return losses, resolved, lines


@pytest.mark.parametrize("dtype,want,says,names", [
    ("bfloat16", "bfloat16", "bf16 mixed precision, the model's own torch_dtype (bfloat16 in", "--torch_dtype float32"),
    ("float32", "float32", "fp32, the model's own torch_dtype (float32 in", "--torch_dtype bfloat16"),
    ("float16", "float32", "fp32: the model's torch_dtype is float16", "--torch_dtype bfloat16"),
])
def test_sft_trains_in_the_models_precision(d, dtype, want, says, names):
    losses, resolved, lines = train(d, dtype, f"auto-{dtype}")
    assert resolved == want
    assert len(lines) == 1 and lines[0].startswith("omnishard sft: precision: "), lines
    assert says in lines[0] and names in lines[0] and str(model_dir(d, dtype) / "config.json") in lines[0], lines
    given, r2, l2 = train(d, dtype, f"given-{dtype}", ["--torch_dtype", want])
    assert losses == given and r2 == want and l2 == []   # the flag given: no line
    other, _, _ = train(d, dtype, f"other-{dtype}", ["--torch_dtype", "float32" if want == "bfloat16" else "bfloat16"])
    assert other != losses   # the two precisions really differ on this model


def test_a_deepspeed_files_bf16_setting_wins_over_the_models(d, tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"bf16": {"enabled": False}, "zero_optimization": {"stage": 0}}))
    losses, resolved, lines = train(d, "bfloat16", "ds-off", ["--deepspeed", str(ds)])
    assert resolved == "float32" and lines == [], lines
    assert losses == train(d, "bfloat16", "ds-off-given", ["--torch_dtype", "float32"])[0]
    # --torch_dtype auto given is the default: the file decides over the model's precision, as without it
    _, resolved, lines = train(d, "bfloat16", "ds-off-auto", ["--deepspeed", str(ds), "--torch_dtype", "auto"])
    assert resolved == "float32" and lines == [], lines


def plan(*args):
    p = run(["plan", *map(str, args), "--nproc", 2, "--max_length", 64])
    return p.stdout, [l for l in p.stderr.splitlines() if ": precision: " in l]


def test_plan_plans_the_precision_sft_runs(d):
    for dtype, want in (("bfloat16", "bfloat16"), ("float32", "float32")):
        m = model_dir(d, dtype)
        out, lines = plan("--model", m)
        assert len(lines) == 1 and lines[0].startswith("omnishard plan: precision: "), lines
        assert out == plan("--model", m, "--torch_dtype", want)[0]
        assert ("bf16 mixed precision" in out) == (want == "bfloat16"), out
    # a preset is the release's config.json: bfloat16
    out, lines = plan("--model", "qwen2.5-0.5b")
    assert len(lines) == 1 and "bfloat16" in lines[0], lines
    assert out == plan("--model", "qwen2.5-0.5b", "--torch_dtype", "bfloat16")[0] != plan(
        "--model", "qwen2.5-0.5b", "--torch_dtype", "float32")[0]


def test_tf32_asks_for_fp32_products(d):
    """--tf32 true (fp32 products in TF32 on a GPU) on a bfloat16 model: fp32, and the line says why (not a refusal
    of --tf32 with a bf16 the user never asked for)"""
    out, lines = plan("--model", model_dir(d, "bfloat16"), "--device", "cuda", "--tf32", "true")
    assert len(lines) == 1 and "--tf32 true" in lines[0] and "fp32" in lines[0], lines
    assert "bf16 mixed precision" not in out
