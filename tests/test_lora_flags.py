"""LoRA options mean LoRA (docs/training.md "LoRA"): --lora_rank, --lora_alpha, --lora_dropout, --target_modules or
--merge_lora given without --train_type lora are refused by sft and plan, naming both fixes - ms-swift's default
train_type is lora, so a copied line without it would otherwise full-finetune in silence. A default value given
explicitly still counts as given."""
import pytest

from omni_run import run
from test_input_checks import sft_args


@pytest.mark.parametrize("extra,names", [
    (["--lora_rank", "8", "--lora_alpha", "32", "--target_modules", "all-linear"],
     "--lora_rank, --lora_alpha, --target_modules"),
    (["--target_modules=all-linear"], "--target_modules"),       # the default, given: still given
    (["--lora-dropout", "0.05", "--train_type", "full"], "--lora_dropout"),
    (["--merge_lora"], "--merge_lora")])
def test_lora_options_without_train_type_lora_are_refused(tmp_path, extra, names):
    p = run(sft_args(tmp_path, *extra), check=False, timeout=60)
    assert p.returncode == 2, p.stderr
    assert f"{names}: LoRA option" in p.stderr and "add --train_type lora" in p.stderr, p.stderr
    assert "or drop" in p.stderr and "nomodel" not in p.stderr, p.stderr   # refused before the model is read
    plan = run(["plan", "--model", "qwen2.5-0.5b", *extra], check=False, timeout=60)
    assert plan.returncode == 2 and f"{names}: LoRA option" in plan.stderr, plan.stderr


def test_lora_options_with_train_type_lora_pass_the_parser(tmp_path):
    p = run(sft_args(tmp_path, "--train_type", "lora", "--lora_rank", "8", "--target_modules", "all-linear"),
            check=False, timeout=60)
    assert p.returncode != 0 and "LoRA option" not in p.stderr and "nomodel" in p.stderr, p.stderr
    plan = run(["plan", "--model", "qwen2.5-0.5b", "--train_type", "lora", "--lora_rank", "8"], timeout=60)
    assert plan.returncode == 0, plan.stderr
