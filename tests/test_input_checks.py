"""Nothing is accepted in silence: every numeric option has a range checked at parse time (listed in --help and
docs/training.md), compatibility flags accept only the values whose meaning omnishard implements."""
import re
from concurrent.futures import ThreadPoolExecutor
import pytest

from omni_run import run, tiny_slam
from conftest import ROOT


def sft_args(tmp_path, *extra):
    # a model directory that does not exist: an option accepted by the parser stops at the model instead
    return ["sft", "--model", tmp_path / "nomodel", "--dataset", tmp_path / "d.jsonl", "--output_dir", tmp_path / "o",
            *extra]


def parse_error(tmp_path, *extra):
    p = run(sft_args(tmp_path, *extra), check=False, timeout=60)
    assert p.returncode > 0, p.stderr
    return p.stderr


RANGES = [   # the ranges their consumers can represent (issue 24: float 3.4e38, int counts, epochs 1e9)
    ("learning_rate", "-1e-4", "[0,3.4e38]"), ("adam_beta1", "1", "[0,1)"), ("adam_beta1", "-0.1", "[0,1)"),
    ("adam_beta2", "1", "[0,1)"), ("adam_beta2", "-1", "[0,1)"), ("adam_epsilon", "-1e-8", "[0,3.4e38]"),
    ("weight_decay", "-0.1", "[0,3.4e38]"), ("max_grad_norm", "-1", "[0,3.4e38]"), ("num_train_epochs", "-1", "(0,1e9]"),
    ("num_train_epochs", "0", "(0,1e9]"), ("warmup_ratio", "1", "[0,1)"), ("warmup_ratio", "-0.1", "[0,1)"),
    ("split_dataset_ratio", "1", "[0,1)"), ("split_dataset_ratio", "-0.5", "[0,1)"),
    ("per_device_train_batch_size", "0", "[1,2147483647]"), ("gradient_accumulation_steps", "0", "[1,2147483647]"),
    ("max_length", "1", "[2,2147483647]"), ("zero_stage", "4", "[0,3]"), ("code_layer", "9", "[1,8]"), ("code_layer", "0", "[1,8]"),
    ("seed", "-1", "[0,inf)"), ("max_steps", "-2", "[0,inf)"), ("logging_steps", "0", "[1,inf)"),
    ("save_steps", "-1", "[0,inf)"), ("eval_steps", "-1", "[0,inf)"), ("warmup_steps", "-1", "[0,inf)"),
]


@pytest.fixture(scope="module")
def range_errors(tmp_path_factory):
    # the processes mostly wait for MPI to start: run them side by side
    t = tmp_path_factory.mktemp("ranges")
    with ThreadPoolExecutor(8) as ex:
        return dict(zip(RANGES, ex.map(lambda c: parse_error(t, f"--{c[0]}", c[1]), RANGES)))


@pytest.mark.parametrize("case", RANGES, ids=[f"{n}={v}" for n, v, _ in RANGES])
def test_a_value_outside_its_range_is_an_error(range_errors, case):
    name, bad, rng = case
    err = range_errors[case]
    assert f"--{name}: expected a value in {rng}, got '{bad}'" in err, err


@pytest.mark.parametrize("name,ok", [("adam_beta1", "0"), ("adam_beta2", "0.999999"), ("warmup_ratio", "0"),
                                     ("learning_rate", "0"), ("max_grad_norm", "0"), ("zero_stage", "3")])
def test_a_value_at_the_edge_of_its_range_is_accepted(tmp_path, name, ok):
    err = parse_error(tmp_path, f"--{name}", ok)
    assert "nomodel/config.json" in err and f"--{name}" not in err, err


@pytest.mark.parametrize("name,bad,supported", [
    ("train_type", "qlora", "full or lora"), ("torch_dtype", "float16", "float32, fp32, bfloat16 or bf16"), ("ddp_backend", "nccl", "mpi"),
    ("device", "npu", "cpu, cuda or cuda:N"), ("lazy_tokenize", "false", "true or True"), ("check_model", "true", "false or False"),
    ("report_to", "swanlab", "none, tensorboard or all"), ("model_type", "qwen3", "slam_omni or qwen2"),
    ("lr_scheduler_type", "polynomial", "linear, constant, constant_with_warmup or cosine"),
    ("truncation_strategy", "split", "right, left or delete"),
])
def test_a_flag_value_that_is_not_implemented_is_an_error(tmp_path, name, bad, supported):
    err = parse_error(tmp_path, f"--{name}", bad)
    assert f"--{name}: '{bad}' is not supported (supported: {supported})" in err, err


@pytest.mark.parametrize("extra", [["--train_type", "full"], ["--train_type", "lora"], ["--torch_dtype", "fp32"],
                                   ["--torch_dtype", "bfloat16"], ["--torch_dtype", "bf16"], ["--ddp_backend", "mpi"],
                                   ["--report_to", "none"], ["--dataloader_num_workers", "0"]])
def test_the_implemented_values_are_accepted(tmp_path, extra):
    assert "nomodel/config.json" in parse_error(tmp_path, *extra)


def help_options():
    p = run(["sft", "--help"], timeout=60)
    return re.findall(r"^  --(\w+) +(.*)$", p.stdout, re.M)


def test_help_and_docs_give_every_numeric_option_its_range():
    doc = open(ROOT / "docs" / "training.md").read()
    opts = help_options()
    assert len(opts) > 40
    numeric = [(n, re.search(r"range (\S+)$", h).group(1)) for n, h in opts if "range " in h]
    for name in ["learning_rate", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay", "max_grad_norm",
                 "num_train_epochs", "warmup_ratio", "split_dataset_ratio", "max_steps", "seed", "eval_steps"]:
        assert name in dict(numeric), name
    for name, rng in numeric:
        assert re.search(rf"`--{name}`[^\n]*`{re.escape(rng)}`", doc), (name, rng)
    for name, h in opts:   # every option is documented
        assert f"`--{name}`" in doc, name


# ---- model files (docs/model-directory.md "Tensors read, ignored and initialised") ----

import json, os, shutil, struct, subprocess, wave
from safetensors.numpy import load_file, save_file
from omni_run import logs
from conftest import BIN, BUILD


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_slam(tmp_path_factory, "inputs", 3)


def train(model, data, out, *extra, steps=1):
    return run(["sft", "--model", model, "--dataset", data, "--output_dir", out, "--max_steps", steps, *extra],
               check=False, timeout=120)


def edited_model(tiny, tmp_path, edit, file="slam_omni.safetensors"):
    m = tmp_path / "m"
    shutil.copytree(tiny / "model", m)
    w = load_file(str(m / file))
    save_file(edit(w), str(m / file), metadata={"format": "pt"})
    return m


def test_an_adapter_with_other_names_is_an_error_not_a_new_adapter(tiny, tmp_path):
    m = edited_model(tiny, tmp_path, lambda w: {"model." + k: v for k, v in w.items()})
    p = train(m, tiny / "data.jsonl", tmp_path / "o")
    assert p.returncode != 0
    for k in ("model.group_decode_adapter.linear.weight", "model.group_decode_adapter.linear.bias"):
        assert f"'{k}'" in p.stderr, p.stderr
    assert "no parameter of the model reads" in p.stderr and not (tmp_path / "o" / "final_model").exists()


def test_an_unused_tensor_is_named(tiny, tmp_path):
    m = edited_model(tiny, tmp_path, lambda w: {**w, "extra.proj.weight": w["model.norm.weight"]}, "model.safetensors")
    p = train(m, tiny / "data.jsonl", tmp_path / "o")
    assert p.returncode != 0 and "'extra.proj.weight'" in p.stderr, p.stderr


def test_a_partly_missing_adapter_is_an_error(tiny, tmp_path):
    m = edited_model(tiny, tmp_path, lambda w: {k: v for k, v in w.items() if not k.endswith("weight")})
    p = train(m, tiny / "data.jsonl", tmp_path / "o")
    assert p.returncode != 0
    assert "tensor 'group_decode_adapter.linear.weight [192, 64]' is missing" in p.stderr, p.stderr


def test_a_first_slam_run_from_qwen2_says_what_it_initialises(tiny, tmp_path):
    m = tmp_path / "m"
    shutil.copytree(tiny / "model", m)
    os.remove(m / "slam_omni.safetensors")
    p = train(m, tiny / "data.jsonl", tmp_path / "o")
    assert p.returncode == 0, p.stderr
    line = [l for l in p.stderr.splitlines() if "initialised (not in the directory: no slam_omni.safetensors, a first SLAM-Omni run" in l]
    assert len(line) == 1, p.stderr
    for k in ("group_decode_adapter.linear.weight [192, 64]", "group_decode_adapter.linear.bias [192]", "torch.nn.Linear"):
        assert k in line[0], line


def test_a_tied_lm_head_in_the_checkpoint_is_reported_as_ignored(tiny, tmp_path):
    m = edited_model(tiny, tmp_path, lambda w: {**w, "lm_head.weight": w["model.embed_tokens.weight"]}, "model.safetensors")
    p = train(m, tiny / "data.jsonl", tmp_path / "o")
    assert p.returncode == 0, p.stderr
    assert "ignored (tie_word_embeddings" in p.stderr and "lm_head.weight" in p.stderr, p.stderr


# ---- data (docs/dataset.md, docs/speech.md) ----

def wav_bytes(channels=1, rate=16000, frames=1600, width=2):
    data = b"\0" * (frames * channels * width)
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * channels * width, channels * width, 8 * width)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


BAD_WAVS = {
    "empty": (lambda p: p.write_bytes(b""), "empty file (0 bytes)"),
    "directory": (lambda p: p.mkdir(), "is a directory"),
    "header_only": (lambda p: p.write_bytes(wav_bytes(frames=0)), "no audio samples"),
    "text": (lambda p: p.write_text("this is not audio\n" * 10), "not a readable audio file"),
    "zero_channels": (lambda p: p.write_bytes(wav_bytes(channels=0)), ""),
    "absurd_rate": (lambda p: p.write_bytes(wav_bytes(rate=10)), ""),
}


@pytest.mark.parametrize("case", list(BAD_WAVS))
def test_a_bad_wav_is_found_when_the_dataset_is_opened(tmp_path, case):
    from oracle import slam_samples_ref as sref
    make, why = BAD_WAVS[case]
    ref_dir = tmp_path / "m"
    ref_dir.mkdir()
    sref.train_tokenizer(ref_dir / "tokenizer.json", vocab_size=300)
    json.dump({"code_layer": 3, "padded_text_vocabsize": 512, "padded_audio_vocabsize": 80}, open(ref_dir / "slam_omni.json", "w"))
    (tmp_path / "good.wav").write_bytes(wav_bytes())
    make(tmp_path / "bad.wav")
    rec = lambda w: json.dumps({"source_wav": w, "source_text": "<USER>: q", "target_text": "x", "target_token": [1, 2]})
    (tmp_path / "data.jsonl").write_text(rec("good.wav") + "\n" + rec("good.wav") + "\n" + rec("bad.wav") + "\n")
    # the sample tool opens the dataset and builds the samples' ids; it never decodes audio
    p = subprocess.run([str(BUILD / "tests" / "test_samples_tool"), tmp_path / "data.jsonl", ref_dir, "4096", "right"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "data.jsonl:3: field 'source_wav': " in p.stderr and "bad.wav" in p.stderr and why in p.stderr, p.stderr


def test_a_pretokenized_line_that_is_not_utf8_is_an_error(tiny, tmp_path):
    lines = open(tiny / "data.jsonl", "rb").read().splitlines()
    bad = lines[1].replace(b"}", b', "note": "caf\xe9"}', 1)
    (tmp_path / "d.jsonl").write_bytes(lines[0] + b"\n" + bad + b"\n")
    p = train(tiny / "model", tmp_path / "d.jsonl", tmp_path / "o")
    assert p.returncode != 0 and "d.jsonl:2: not valid UTF-8" in p.stderr, p.stderr


def no_targets(line):
    o = json.loads(line)
    o["labels"] = [[-100] * len(r) for r in o["labels"]]
    return json.dumps(o)


def test_a_step_without_targets_logs_loss_null_and_plot_still_works(tiny, tmp_path):
    lines = open(tiny / "data.jsonl").read().splitlines()
    (tmp_path / "d.jsonl").write_text(lines[0] + "\n" + no_targets(lines[1]) + "\n")
    p = train(tiny / "model", tmp_path / "d.jsonl", tmp_path / "o", "--num_train_epochs", 1, steps=0)
    assert p.returncode == 0, p.stderr
    losses = [l["loss"] for l in logs(tmp_path / "o")]
    assert len(losses) == 2 and losses.count(None) == 1 and all(x is None or x > 0 for x in losses), losses
    q = run(["plot", tmp_path / "o" / "logging.jsonl", "--output", tmp_path / "loss.svg"], check=False, timeout=60)
    assert q.returncode == 0 and (tmp_path / "loss.svg").exists(), q.stderr


def test_no_target_in_any_step_is_an_error(tiny, tmp_path):
    lines = open(tiny / "data.jsonl").read().splitlines()
    (tmp_path / "d.jsonl").write_text("".join(no_targets(l) + "\n" for l in lines))
    p = train(tiny / "model", tmp_path / "d.jsonl", tmp_path / "o", steps=2)
    assert p.returncode != 0 and "no step had a target token" in p.stderr, p.stderr
    assert not (tmp_path / "o" / "final_model").exists()
    assert [l["loss"] for l in logs(tmp_path / "o")] == [None, None]


def test_a_directory_where_a_file_is_expected_is_named_as_such(tmp_path):
    """Every reader of a file refuses a directory with its name (fopen opens one and its size reads as 2^63-1)."""
    d = tmp_path / "folder"
    d.mkdir()
    p = run(["plot", d], check=False, timeout=60)
    assert p.returncode != 0 and f"{d}: is a directory, expected a logging.jsonl" in p.stderr, p.stderr
    q = subprocess.run([str(BUILD / "tests" / "test_samples_tool"), d, d, "4096", "right"],
                       capture_output=True, text=True, timeout=60)
    assert q.returncode == 1 and f"{d}: is a directory, expected the dataset" in q.stderr, q.stdout + q.stderr


def test_the_defaults_that_differ_from_ms_swift(tmp_path, tmp_path_factory):
    """sft --help ends with the defaults that differ from ms-swift's, each with its reason; docs/training.md has the
    same table, and the omnishard column is what a run given none of these options resolves (its args.json)"""
    helptext = run(["sft", "--help"], timeout=60).stdout
    rows = re.findall(r"^  --(\w+) +(.+?); ms-swift: (.+?)\. (.+)$", helptext.split("defaults that differ from ms-swift's")[1], re.M)
    assert {r[0] for r in rows} >= {"weight_decay", "lr_scheduler_type", "train_type", "num_train_epochs",
                                    "truncation_strategy", "logging_steps"}, rows
    # --torch_dtype's default is the model's own, as ms-swift's (tests/test_dtype_default.py): no longer a difference
    assert "torch_dtype" not in {r[0] for r in rows}, rows
    doc = open(ROOT / "docs" / "training.md").read()
    for name, ours, swift, why in rows:
        assert f"| `--{name}` | `{ours}` | `{swift}` | {why} |" in doc, name
    from omni_run import sft
    d = tiny_slam(tmp_path_factory, "swift_defaults", 1)
    sft(d / "model", d / "data.jsonl", tmp_path / "o", 1)
    got = json.load(open(tmp_path / "o" / "args.json"))
    for name, ours, _, _ in rows:
        assert str(got[name]) == ours or (isinstance(got[name], (int, float)) and got[name] == float(ours)), (name, got[name])
