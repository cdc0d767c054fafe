"""Every command parses its options from one table (src/core/opts.c, docs/operations.md "Options"): --help lists
each option with its range or allowed values, every unknown option is reported at once with the nearest known
name, '-' spells '_', a boolean given alone means true."""
import pytest

from omni_run import run

# (command, an unknown option, its nearest known name, an option with a range and a value outside it)
COMMANDS = [
    (["infer", "--model", "m", "--question", "q"], "--max_new_token", "--max_new_tokens", ("--top_p", "2", "(0,1]")),
    (["export", "--checkpoint", "c", "--output_dir", "o"], "--merge-lora_", "--merge_lora", None),
    (["plot", "log.jsonl"], "--outptu", "--output", None),
    (["tokenize", "--tokenizer", "t"], "--decod", "--decode", None),
    (["mel", "--wav", "w", "--out", "o"], "--n_mel", "--n_mels", ("--n_mels", "0", "[1,1024]")),
]


@pytest.mark.parametrize("base,unknown,nearest,ranged", COMMANDS, ids=[c[0][0] for c in COMMANDS])
def test_every_unknown_option_at_once_with_the_nearest_name(base, unknown, nearest, ranged):
    p = run([*base, unknown, "1", "--zzzz_not_an_option"], check=False, timeout=60)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert f"unknown option '{unknown}' (nearest: {nearest})" in p.stderr, p.stderr
    assert "unknown option '--zzzz_not_an_option'" in p.stderr, p.stderr
    if ranged:
        name, bad, rng = ranged
        p = run([*base, name, bad], check=False, timeout=60)
        assert p.returncode == 2 and f"{name}: expected a value in {rng}, got '{bad}'" in p.stderr, p.stderr


@pytest.mark.parametrize("base", [c[0][:1] for c in COMMANDS], ids=[c[0][0] for c in COMMANDS])
def test_help_comes_from_the_table(base):
    p = run([*base, "--help"], timeout=60)
    assert "a boolean alone means true" in p.stdout, p.stdout
    assert p.stdout.count("\n  --") >= 2 or p.stdout.count("\n  -o, --") == 1, p.stdout


def test_dashes_and_bare_booleans(tmp_path):
    """--max-new-tokens is --max_new_tokens and --merge_lora alone is true: both commands get as far as the model"""
    p = run(["infer", "--model", tmp_path / "nope", "--question", "hi", "--max-new-tokens", "3", "--do_sample"],
            check=False, timeout=60)
    assert p.returncode > 0 and "nope/config.json" in p.stderr, p.stderr
    p = run(["export", "--checkpoint", tmp_path / "nope", "--output-dir", tmp_path / "o", "--merge_lora"],
            check=False, timeout=60)
    assert p.returncode > 0 and "nope" in p.stderr and "unknown" not in p.stderr, p.stderr


@pytest.mark.parametrize("cmd", [["sft", "--model", "Qwen/Qwen2.5-7B", "--dataset", "d.jsonl", "--output_dir", "{t}/o"],
                                 ["infer", "--model", "Qwen/Qwen2.5-7B", "--question", "hi"],
                                 ["plan", "--model", "Qwen/Qwen2.5-7B"],
                                 ["sft", "--model", "{t}", "--speech_encoder", "openai/whisper-small", "--dataset",
                                  "d.jsonl", "--output_dir", "{t}/o"]], ids=["sft", "infer", "plan", "encoder"])
def test_a_hub_id_says_nothing_is_downloaded(tmp_path, cmd):
    p = run([c.format(t=tmp_path) for c in cmd], check=False, timeout=60)
    hub = "openai/whisper-small" if "openai/whisper-small" in cmd else "Qwen/Qwen2.5-7B"
    assert p.returncode > 0 and "reads like a Hugging Face Hub id, and omnishard downloads nothing" in p.stderr, p.stderr
    assert f"huggingface-cli download {hub} --local-dir models/{hub.split('/')[1]}" in p.stderr, p.stderr
    assert not (tmp_path / "o").exists()
