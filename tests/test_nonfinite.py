"""Non-finite numbers never go unnoticed: a NaN/Inf loss, gradient norm or evaluation loss stops every rank with a
message naming the step and the first non-finite parameter, exit non-zero, and nothing is saved from non-finite
weights; an input model or checkpoint holding NaN/Inf is refused naming the tensor."""
import json, os, re, shutil
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from omni_run import run, sft, tiny_slam

FNV_BASIS, FNV_PRIME = 1469598103934665603, 0x100000001B3   # src/core/rng.h (OS_FNV_BASIS)


def fnv1a(data):
    h = FNV_BASIS
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_slam(tmp_path_factory, "nonfinite", 6)


def param_names(model_dir):
    names = set(load_file(os.path.join(model_dir, "model.safetensors")))
    names |= set(load_file(os.path.join(model_dir, "slam_omni.safetensors")))
    return names


def checkpoint_steps(out):
    return sorted(int(p.name.split("-")[1]) for p in out.iterdir() if re.fullmatch(r"checkpoint-\d+", p.name))


def all_finite(ckpt):
    for f in ckpt.glob("rank-*.safetensors"):
        for k, v in load_file(str(f)).items():
            if not np.all(np.isfinite(v)):
                return False
    return True


@pytest.mark.parametrize("np_,extra", [(None, []), (2, ["--deepspeed", "zero3"])])
def test_huge_learning_rate_stops_naming_step_and_parameter(tiny, tmp_path, np_, extra):
    out = tmp_path / "o"
    p = sft(tiny / "model", tiny / "data.jsonl", out, 12,
            ["--learning_rate", "1e10", "--save_steps", "1", "--max_grad_norm", "0", *extra], np_=np_, check=False)
    assert p.returncode > 0, p.stderr
    m = re.search(r"step (\d+): non-finite .*first parameter with a non-finite \w+: '([^']+)'", p.stderr)
    assert m, p.stderr
    bad_step, name = int(m.group(1)), m.group(2)
    assert name in param_names(tiny / "model"), name
    assert p.stderr.count("non-finite") >= 1 and p.stderr.count(f"step {bad_step}: non-finite") == 1, p.stderr
    assert not (out / "final_model").exists()
    steps = checkpoint_steps(out)
    assert steps == list(range(1, bad_step)), (steps, bad_step)   # every finite step saved, nothing after
    for s in steps:
        assert all_finite(out / f"checkpoint-{s}"), s
    assert not any(p.name.endswith(".tmp") for p in out.iterdir())


def test_weights_overflowing_in_the_update_are_not_saved(tiny, tmp_path):
    """lr 3e37 and weight decay 100: each within its option's range (what a float holds), but AdamW's decay factor
    1 - lr * wd overflows fp32 to -inf: the step's loss and gradients are finite, the updated weights are not, and
    neither the checkpoint nor final_model may be written from them. (lr 1e39, the earlier way in, is refused by
    the option's range since issue 24.)"""
    out = tmp_path / "o"
    p = sft(tiny / "model", tiny / "data.jsonl", out, 1, ["--learning_rate", "3e37", "--weight_decay", "100"], check=False)
    assert p.returncode > 0, p.stderr
    assert re.search(r"step 1: non-finite parameters after the optimizer step; first parameter with a non-finite "
                     r"value: '[^']+'", p.stderr), p.stderr
    assert checkpoint_steps(out) == [] and not (out / "final_model").exists()


@pytest.mark.parametrize("file,tensor", [("model.safetensors", "model.layers.0.mlp.up_proj.weight"),
                                         ("slam_omni.safetensors", None)])
@pytest.mark.parametrize("np_", [None, 2])
def test_nan_in_input_model_is_refused_naming_the_tensor(tiny, tmp_path, file, tensor, np_):
    m = tmp_path / "m"
    shutil.copytree(tiny / "model", m)
    w = load_file(str(m / file))
    tensor = tensor or sorted(w)[-1]
    w[tensor] = w[tensor].copy()
    w[tensor].flat[w[tensor].size // 2] = np.nan
    save_file(w, str(m / file), metadata={"format": "pt"})
    p = sft(m, tiny / "data.jsonl", tmp_path / "o", 1, ["--deepspeed", "zero3"] if np_ else [], np_=np_, check=False)
    assert p.returncode > 0, p.stderr
    assert f"tensor '{tensor}'" in p.stderr and "NaN" in p.stderr, p.stderr
    assert not (tmp_path / "o" / "final_model").exists()


def refresh_manifest(ckpt):
    """Recompute the manifest's per-file sizes and checksums (and its own checksum) after editing a rank file."""
    man = json.load(open(ckpt / "manifest.json"))
    for f in man["files"]:
        data = open(ckpt / f["name"], "rb").read()
        f["bytes"], f["fnv1a64"] = len(data), "%016x" % fnv1a(data)
    man.pop("manifest_fnv1a64", None)
    body = json.dumps(man, indent=1)[:-2].encode()   # all but the closing "\n}"
    trailer = b',\n"manifest_fnv1a64": "%016x"\n}\n' % fnv1a(body)
    open(ckpt / "manifest.json", "wb").write(body + trailer)


def test_nan_in_checkpoint_is_refused_naming_the_parameter(tiny, tmp_path):
    out = tmp_path / "o"
    sft(tiny / "model", tiny / "data.jsonl", out, 1, [])
    ck = out / "checkpoint-1"
    w = load_file(str(ck / "rank-00000.safetensors"))
    key = next(k for k in sorted(w) if k.startswith("param/layers.0"))
    w[key] = w[key].copy()
    w[key][3] = np.inf
    save_file(w, str(ck / "rank-00000.safetensors"), metadata={"format": "omnishard-checkpoint-1"})
    refresh_manifest(ck)
    p = sft(tiny / "model", tiny / "data.jsonl", tmp_path / "r", 2, ["--resume_from_checkpoint", ck], check=False)
    assert p.returncode > 0, p.stderr
    assert f"tensor '{key}' (parameter 'model.layers.0." in p.stderr and "infinite" in p.stderr, p.stderr


@pytest.fixture(scope="module")
def eval_only_overflow(tmp_path_factory):
    """A model whose speech projector overflows fp32 (finite weights of magnitude 1e30: two matmuls give Inf/NaN),
    text-only training data (the projector gets no gradient and stays finite: Adam's update is 0/(0+eps)) and an
    evaluation set with one spoken question: only evaluation runs the projector, so only the eval loss is NaN."""
    from oracle import slam_omni_ref as ref
    from test_speech_train import write_data, write_wav
    d = tmp_path_factory.mktemp("evalnan")
    ref.make_model(str(d / "model"), hidden=16, layers=1, heads=2, kv_heads=1, inter=32, T=192, A=80, G=3, seed=0)
    ref.add_projector(str(d / "model"), 16, 24, 16)
    ref.make_encoder(str(d / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    w = load_file(str(d / "model" / "slam_omni.safetensors"))
    for k in ("encoder_projector.linear1.weight", "encoder_projector.linear2.weight"):
        w[k] = (np.sign(w[k]) * 1e30).astype(np.float32)
    save_file(w, str(d / "model" / "slam_omni.safetensors"), metadata={"format": "pt"})
    write_wav(d / "q.wav", 0.6, 500, seed=1)
    write_data(d / "data.jsonl", 4, {})
    write_data(d / "val.jsonl", 2, {1: "q.wav"}, seed=3)
    return d


@pytest.mark.parametrize("np_,extra", [(None, []), (2, ["--deepspeed", "zero3"])])
def test_nonfinite_eval_loss_stops_every_rank_keeping_the_last_checkpoint(eval_only_overflow, tmp_path, np_, extra):
    """Evaluation at step 2 gives NaN (one rank's micro-batch on 2 ranks); training is finite throughout. The run
    stops at step 2 naming the evaluation loss, exit non-zero, checkpoint-1 intact, nothing saved after it."""
    d, out = eval_only_overflow, tmp_path / "o"
    p = sft(d / "model", d / "data.jsonl", out, 4,
            ["--val_dataset", d / "val.jsonl", "--speech_encoder", d / "enc", "--eval_steps", "2", "--save_steps", "1",
             "--max_length", "64", *extra], np_=np_, check=False)
    assert p.returncode > 0, p.stderr
    assert re.search(r"step 2: non-finite evaluation loss \(eval_loss -?nan; the training loss was finite\); first "
                     r"parameter with a non-finite value: none \(only the loss is\); stopping without saving \(the last "
                     r"checkpoint written is \S+/checkpoint-1; ", p.stderr), p.stderr
    lines = [json.loads(l) for l in open(out / "logging.jsonl")]
    assert [l["step"] for l in lines if "loss" in l] == [1, 2] and all(np.isfinite(l["loss"]) for l in lines if "loss" in l)
    assert [(l["step"], l["eval_loss"]) for l in lines if "eval_loss" in l] == [(2, None)]
    assert checkpoint_steps(out) == [1] and all_finite(out / "checkpoint-1")
    assert not (out / "final_model").exists() and not any(q.name.endswith(".tmp") for q in out.iterdir())
