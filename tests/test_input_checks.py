"""Nothing is accepted in silence: every numeric option has a range checked at parse time (listed in --help and
docs/training.md), compatibility flags accept only the values whose meaning omnishard implements."""
import re
from concurrent.futures import ThreadPoolExecutor
import pytest

from omni_run import run
from conftest import ROOT


def sft_args(tmp_path, *extra):
    # a model directory that does not exist: an option accepted by the parser stops at the model instead
    return ["sft", "--model", tmp_path / "nomodel", "--dataset", tmp_path / "d.jsonl", "--output_dir", tmp_path / "o",
            *extra]


def parse_error(tmp_path, *extra):
    p = run(sft_args(tmp_path, *extra), check=False, timeout=60)
    assert p.returncode > 0, p.stderr
    return p.stderr


RANGES = [
    ("learning_rate", "-1e-4", "[0,inf)"), ("adam_beta1", "1", "[0,1)"), ("adam_beta1", "-0.1", "[0,1)"),
    ("adam_beta2", "1", "[0,1)"), ("adam_beta2", "-1", "[0,1)"), ("adam_epsilon", "-1e-8", "[0,inf)"),
    ("weight_decay", "-0.1", "[0,inf)"), ("max_grad_norm", "-1", "[0,inf)"), ("num_train_epochs", "-1", "(0,inf)"),
    ("num_train_epochs", "0", "(0,inf)"), ("warmup_ratio", "1", "[0,1)"), ("warmup_ratio", "-0.1", "[0,1)"),
    ("split_dataset_ratio", "1", "[0,1)"), ("split_dataset_ratio", "-0.5", "[0,1)"),
    ("per_device_train_batch_size", "0", "[1,inf)"), ("gradient_accumulation_steps", "0", "[1,inf)"),
    ("max_length", "1", "[2,inf)"), ("zero_stage", "4", "[0,3]"), ("code_layer", "9", "[1,8]"), ("code_layer", "0", "[1,8]"),
    ("seed", "-1", "[0,inf)"), ("max_steps", "-2", "[0,inf)"), ("logging_steps", "0", "[1,inf)"),
    ("save_steps", "-1", "[0,inf)"), ("eval_steps", "-1", "[0,inf)"), ("warmup_steps", "-1", "[0,inf)"),
    ("dataloader_num_workers", "4", "[0,0]"),
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
    ("train_type", "qlora", "full or lora"), ("torch_dtype", "bfloat16", "float32 or fp32"), ("ddp_backend", "nccl", "mpi"),
    ("device", "cuda", "cpu"), ("lazy_tokenize", "false", "true or True"), ("check_model", "true", "false or False"),
    ("report_to", "wandb", "none"), ("model_type", "qwen3", "slam_omni or qwen2"),
    ("lr_scheduler_type", "polynomial", "linear, constant, constant_with_warmup or cosine"),
    ("truncation_strategy", "split", "right, left or delete"),
])
def test_a_flag_value_that_is_not_implemented_is_an_error(tmp_path, name, bad, supported):
    err = parse_error(tmp_path, f"--{name}", bad)
    assert f"--{name}: '{bad}' is not supported (supported: {supported})" in err, err


@pytest.mark.parametrize("extra", [["--train_type", "full"], ["--train_type", "lora"], ["--torch_dtype", "fp32"], ["--ddp_backend", "mpi"],
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
