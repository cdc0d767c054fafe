"""Start-up agreement (docs/training.md): ranks launched with different options or data stop at once, every rank
naming the option (or file) and both values; a rank with invalid options makes every rank print its reason.
MPMD launches (`mpirun -np 1 A : -np 1 B`) give each rank its own command line."""
import os, random, shutil, subprocess
import pytest

from omni_run import MPIRUN, tiny_slam
from conftest import BIN


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_slam(tmp_path_factory, "agree", 4)


def mpmd(ranks, timeout=60):
    """ranks: one (argument list, working directory) per rank; returns the finished process."""
    cmd = list(MPIRUN)
    for i, (args, wdir) in enumerate(ranks):
        cmd += ([":"] if i else []) + ["-np", "1", "-wdir", str(wdir), str(BIN), *map(str, args)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def base(d, out="o"):
    return ["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / out, "--max_steps", 1]


def lines_of(p, rank):
    return [l for l in p.stderr.splitlines() if l.startswith(f"omnishard: rank {rank}: ")]


# one option at a time differs on rank 1 (numbers in their shortest round-trip text: 0.99, not 0.98999999999999999): (extra args of rank 0, extra args of rank 1, rank 0's text, rank 1's text)
CASES = {
    "split_dataset_ratio": ([], ["--split_dataset_ratio", "0.5"], "0", "0.5"),
    "eval_steps": ([], ["--eval_steps", "3"], "0", "3"),
    "adam_beta1": ([], ["--adam_beta1", "0.8"], "0.9", "0.8"),
    "adam_beta2": (["--adam_beta2", "0.99"], ["--adam_beta2", "0.98"], "0.99", "0.98"),
    "adam_epsilon": ([], ["--adam_epsilon", "1e-6"], "1e-08", "1e-06"),
    "warmup_ratio": ([], ["--warmup_ratio", "0.1"], "0", "0.1"),
    "truncation_strategy": ([], ["--truncation_strategy", "left"], "right", "left"),
    "loss_weights": (["--loss_weights", "1,1,1,1"], ["--loss_weights", "1,0.5,1,1"], "1,1,1,1", "1,0.5,1,1"),
    "param_loss": (["--param_loss", "dummy:model.norm"], ["--param_loss", "dummy:model.norm", "--param_loss", "l2:0.5:lm_head"],
                   "dummy:model.norm", "dummy:model.norm l2:0.5:lm_head"),
    "save_only_model": ([], ["--save_only_model", "true"], "false", "true"),
    "logging_steps": ([], ["--logging_steps", "2"], "1", "2"),
    "zero_stage": (["--zero_stage", "3"], ["--deepspeed", "zero2"], "3", "2"),
}


def test_options_that_differ_on_one_rank_stop_every_rank(tiny):
    # every differing option is named in the one message (one launch checks them all)
    cases = dict(CASES, val_dataset=([], ["--val_dataset", tiny / "data.jsonl"], "(not given)", str(tiny / "data.jsonl")))
    a0 = [x for c in cases.values() for x in c[0]]
    a1 = [x for c in cases.values() for x in c[1]]
    p = mpmd([(base(tiny) + a0, tiny), (base(tiny) + a1, tiny)])
    assert p.returncode != 0
    for name, (_, _, v0, v1) in cases.items():
        want = f"ranks disagree on --{name}: rank 0 has '{v0}', rank 1 has '{v1}'"
        for r in (0, 1):
            assert any(want in l for l in lines_of(p, r)), (want, p.stderr)
    assert not (tiny / "o" / "logging.jsonl").exists()


def test_one_differing_option_is_enough(tiny):
    p = mpmd([(base(tiny), tiny), (base(tiny) + ["--eval_steps", "3"], tiny)])
    assert p.returncode != 0
    assert "ranks disagree on --eval_steps: rank 0 has '0', rank 1 has '3'" in p.stderr, p.stderr
    assert "ranks disagree on --" not in p.stderr.replace("ranks disagree on --eval_steps", ""), p.stderr


def test_the_same_value_spelt_differently_agrees(tiny, tmp_path):
    # --deepspeed zero2 and --zero_stage 2 are one setting; 0.10 and 1e-1 one number
    a = base(tiny, tmp_path / "o")
    p = mpmd([(a + ["--deepspeed", "zero2", "--warmup_ratio", "0.10"], tiny),
              (a + ["--zero_stage", "2", "--warmup_ratio", "1e-1"], tiny)])
    assert p.returncode == 0, p.stderr


def test_canonical_values_agree(tiny, tmp_path):
    # issue 24: an alias of a choice, a default and the same value given explicitly, a module list that selects
    # every module are one setting each (LoRA options need --train_type lora)
    a = base(tiny, tmp_path / "o") + ["--train_type", "lora"]
    p = mpmd([(a + ["--torch_dtype", "bf16", "--lazy_tokenize", "True", "--check_model", "false"], tiny),
              (a + ["--torch_dtype", "bfloat16", "--adam_beta1", "0.90", "--learning_rate", "0.0001",
                    "--target_modules", "down_proj,q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj",
                    "--check_model", "False"], tiny)])
    assert p.returncode == 0, p.stderr


def test_the_models_defaults_given_explicitly_agree(tiny, tmp_path):
    # issue 24: the options whose default comes from the model directory (slam_omni.json: code layers, latency, layer
    # shift, loss weights 1/(G+1) each; the trained embedding rows) agree with the same values given explicitly,
    # and a different value is still refused, naming the resolved default
    import json
    oc = json.loads((tiny / "model" / "slam_omni.json").read_text())
    G = int(oc.get("code_layer", 3))
    latency = int(oc.get("num_latency_tokens", 0))
    shift = "true" if oc.get("do_layershift", False) else "false"
    a = base(tiny, tmp_path / "o")
    given = ["--code_layer", G, "--num_latency_tokens", latency, "--do_layershift", shift,
             "--loss_weights", ",".join([str(1 / (G + 1))] * (G + 1)), "--trainable_embed_rows", "all"]
    p = mpmd([(a, tiny), (a + given, tiny)])
    assert p.returncode == 0, p.stderr
    p = mpmd([(a, tiny), (base(tiny, tmp_path / "o2") + ["--num_latency_tokens", latency + 1], tiny)])
    assert p.returncode != 0
    want = f"ranks disagree on --num_latency_tokens: rank 0 has '{latency}', rank 1 has '{latency + 1}'"
    assert want in p.stderr, p.stderr


def test_per_rank_options_may_differ(tiny, tmp_path):
    a = base(tiny, tmp_path / "o")
    p = mpmd([(a + ["--dump_logits", tmp_path / "l.safetensors"], tiny), (a, tiny)])
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "l.safetensors").exists()


def test_invalid_options_on_one_rank_are_printed_by_every_rank(tiny):
    p = mpmd([(base(tiny), tiny), (base(tiny) + ["--adam_beta2", "-1"], tiny)])
    assert p.returncode != 0
    for r in (0, 1):
        assert any("options of rank 1: --adam_beta2: expected a value in [0,1), got '-1'" in l for l in lines_of(p, r)), p.stderr
    p = mpmd([(base(tiny) + ["--learning_rat", "1"], tiny), (base(tiny), tiny)])
    for r in (0, 1):
        assert any("options of rank 0: unknown option '--learning_rat'" in l for l in lines_of(p, r)), p.stderr


def test_the_same_invalid_line_on_every_rank_prints_the_reason_alone(tiny):
    """one mpirun line for all ranks (the common case): each rank prints the reason as one rank would, not a list of
    ranks that reads like a disagreement; two different reasons still name their ranks"""
    bad = base(tiny) + ["--streaming", "true"]
    p = mpmd([(bad, tiny), (bad, tiny)])
    assert p.returncode != 0
    for r in (0, 1):
        got = lines_of(p, r)
        assert any(l.startswith(f"omnishard: rank {r}: unknown option '--streaming' (ms-swift's; not in omnishard)")
                   for l in got), p.stderr
        assert not any("options of rank" in l for l in got), p.stderr
    p = mpmd([(bad, tiny), (base(tiny) + ["--adam_beta2", "-1"], tiny)])
    for r in (0, 1):
        got = " ".join(lines_of(p, r))
        assert "the options of rank 0: unknown option '--streaming'" in got, p.stderr
        assert "the options of rank 1: --adam_beta2: expected a value in [0,1)" in got, p.stderr


def test_help_on_every_rank_prints_once_and_exits_zero(tiny):
    p = mpmd([(["sft", "--help"], tiny), (["sft", "--help"], tiny)])
    assert p.returncode == 0 and p.stdout.count("usage: omnishard sft") == 1, p.stdout + p.stderr


def test_a_change_in_the_middle_of_a_large_dataset_is_found(tiny, tmp_path):
    # the same relative path, resolved in two working directories: a 3 MB file that differs in one digit of its
    # middle line on rank 1 (the old digest hashed the first and last MB only)
    lines = open(tiny / "data.jsonl").read().splitlines()
    rows = [lines[i % len(lines)] for i in range(7000)]
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    for d in (a, b):
        shutil.copytree(tiny / "model", d / "model")
    text = "\n".join(rows) + "\n"
    assert len(text) > 3_000_000
    (a / "data.jsonl").write_text(text)
    mid = len(text) // 2
    i = text.index("[1", mid) + 1     # a token id in the middle line: 1 -> 2 keeps it valid
    (b / "data.jsonl").write_text(text[:i] + "2" + text[i + 1:])
    args = ["sft", "--model", "model", "--dataset", "data.jsonl", "--output_dir", "o", "--max_steps", 1]
    p = mpmd([(args, a), (args, b)])
    assert p.returncode != 0
    assert "ranks disagree on the --dataset file" in p.stderr and f"{len(text)} bytes, digest" in p.stderr, p.stderr
    assert not (a / "o" / "logging.jsonl").exists()
