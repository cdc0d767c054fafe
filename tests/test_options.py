"""Every command parses its options from one table (src/core/opts.c, docs/operations.md "Options"): --help lists
each option with its range or allowed values, every unknown option is reported at once with the nearest known
name, '-' spells '_', a boolean given alone means true."""
import json

import pytest

from omni_run import run

# (command, an unknown option, its nearest known name, an option with a range and a value outside it)
COMMANDS = [
    (["infer", "--model", "m", "--question", "q"], "--max_new_token", "--max_new_tokens", ("--top_p", "2", "(0,1]")),
    (["export", "--checkpoint", "c", "--output_dir", "o"], "--merge-lora_", "--merge_lora", None),
    (["plot", "log.jsonl"], "--outptu", "--output", None),
    (["tokenize", "--tokenizer", "t"], "--decod", "--decode", None),
    (["mel", "--wav", "w", "--out", "o"], "--n_mel", "--n_mels", ("--n_mels", "0", "[1,1024]")),
    (["plan", "--model", "qwen2.5-0.5b"], "--nprocs", "--nproc", ("--nproc", "0", "[1,1048576]")),
    (["sft", "--model", "m", "--dataset", "d", "--output_dir", "o"], "--learning_rat", "--learning_rate",
     ("--max_length", "1", "[2,2147483647]")),
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


def test_sft_takes_hugging_face_spellings(tmp_path_factory):
    """--learning-rate for --learning_rate, a bare boolean (followed by another option, or last), --max_steps -1
    (HF's 'not set': the epochs decide) -- read back from the run's args.json (issue 27)"""
    from omni_run import tiny_slam
    d = tiny_slam(tmp_path_factory, "spell", 3)
    out = d / "o"
    run(["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", out, "--learning-rate", "0.003",
         "--freeze_group_decode_adapter", "--max_steps", "-1", "--num-train-epochs", "1", "--save_only_model",
         "--system", "2024"], timeout=120)
    args = json.load(open(out / "args.json"))
    assert args["learning_rate"] == 0.003 and args["num_train_epochs"] == 1, args
    assert args["freeze_group_decode_adapter"] is True and args["save_only_model"] is True, args
    assert args["max_steps"] == 0, args
    assert args["system"] == "2024", args   # a text option stays text in args.json, even when it reads as a number
    steps = [json.loads(l)["step"] for l in open(out / "logging.jsonl") if '"loss"' in l]
    assert steps == [1, 2, 3], steps   # 3 samples, batch 1, one epoch


def test_plan_takes_an_sft_command_line():
    """the training options are sft's table: ranges, bare booleans and spellings as sft has them"""
    base = ["plan", "--model", "qwen2.5-0.5b", "--zero_stage", 0, "--gradient_checkpointing", "true"]
    free = run(base, timeout=60).stdout
    frozen = run([*base, "--freeze-llm", "--dataset", "d.jsonl", "--output_dir", "o", "--learning_rate", "1e-3"],
                 timeout=60).stdout
    assert "0.550B parameters, 0.550B trained" in free and "0.550B trained" not in frozen, frozen
    p = run([*base, "--lora_rank", "0"], check=False, timeout=60)
    assert p.returncode == 2 and "--lora_rank: expected a value in [1,4096], got '0'" in p.stderr, p.stderr


@pytest.mark.parametrize("far", ["--padding_free", "--streaming", "--bogus"])
def test_an_option_far_from_every_name_gets_no_suggestion(far):
    """The nearest name is suggested only within a slip of the fingers (edit distance <= max(2, len/3)): ms-swift's
    --padding_free is not a misspelt --learning_rate, and saying so would mislead."""
    p = run(["sft", "--model", "m", "--dataset", "d", "--output_dir", "o", far, "true"], check=False)
    assert p.returncode != 0 and f"unknown option '{far}'" in p.stderr and "(nearest:" not in p.stderr, p.stderr


def sft_table():
    """(name, section) of each entry of sft's option table, read from src/train/args.c (each entry names its section:
    X(section, name, ...), F(section, name) or IN(section, field) beside .name), and the sections of os_sft_args in
    their order (src/train/args.h)"""
    import pathlib
    import re
    root = pathlib.Path(__file__).resolve().parent.parent
    src = (root / "src" / "train" / "args.c").read_text()
    table = src[src.index("static const os_opt opts[] = {"):]
    table = table[:table.index("\n};")]
    entries = []
    for m in re.finditer(r"^    (?:[SDQCNBXL]\((\w+), (\w+)|\{F\((\w+), (\w+)\)|\{\.name = \"(\w+)\", (?:\.type = \w+, )?IN\((\w+),)",
                         table, re.M):
        g = m.groups()
        entries.append((g[1], g[0]) if g[0] else (g[3], g[2]) if g[2] else (g[4], g[5]))
    header = (root / "src" / "train" / "args.h").read_text()
    body = header[header.index("typedef struct {\n    os_sft_model_opts model;"):]
    sections = re.findall(r"^    os_sft_\w+_opts (\w+);", body[:body.index("} os_sft_args;")], re.M)
    return entries, sections


def help_sections(text, start):
    """{section: [option names]} of --help from the line that starts with `start`, and the headings in order"""
    import re
    out, order, cur = {}, [], None
    for line in text[text.index(start):].splitlines()[1:]:
        if not line.strip():
            continue
        h = re.match(r"^ (\w+): ", line)
        if h:
            cur = h.group(1)
            order.append(cur)
            out.setdefault(cur, [])
        elif line.startswith("  ") and cur:
            out[cur] += re.findall(r"--(\w+)", line.split("  ", 2)[1] if line.startswith("  -") else line)[:1]
        else:
            break
    return out, order


@pytest.mark.parametrize("cmd,start", [(["sft"], "options ("), (["plan"], "training options (omnishard sft --help)")])
def test_help_lists_the_options_by_section(cmd, start):
    """sft --help (and plan's training options) list every option of the table exactly once, under its section's
    heading (the sections in os_sft_args's order), as the table says"""
    entries, sections = sft_table()
    assert len(entries) >= 75 and len({n for n, _ in entries}) == len(entries), len(entries)
    assert sections == ["model", "data", "training", "checkpoint", "parallelism", "logging", "device", "debug"], sections
    p = run([*cmd, "--help"], timeout=60)
    got, order = help_sections(p.stdout, start)
    assert order == sections, order
    listed = [n for names in got.values() for n in names]
    assert sorted(listed) == sorted(n for n, _ in entries), set(listed) ^ {n for n, _ in entries}
    for name, section in entries:
        assert name in got[section], (name, section, got)


def test_only_the_parser_the_agreement_args_json_the_commands_and_the_run_ends_take_the_whole_sft_options():
    """Each part of an sft run takes the sections of os_sft_args it reads (docs/design.md "Configuration"); a
    function whose parameters hold the whole struct is one of those that go over every option (the parser in
    train/args.c, the start-up agreement, args.json), the command's settling (cli/cmd_sft.c) or one of the run's two
    ends, and os_sft_state, what the run opened, holds no options (the stages get their sections as arguments)"""
    import pathlib
    import re
    root = pathlib.Path(__file__).resolve().parent.parent
    allowed = {"os_agree_options", "os_args_json_write", "settle", "os_sft_open", "os_sft_run"}
    whole = {}
    for f in sorted((root / "src").rglob("*.[ch]")):
        if f.relative_to(root).as_posix() in ("src/train/args.c", "src/train/args.h"):   # the parser and its table
            continue
        for m in re.finditer(r"\b(\w+)\(([^()]*\bos_sft_args\s*\*[^()]*)\)", f.read_text()):
            whole.setdefault(m.group(1), set()).add(f.relative_to(root).as_posix())
    assert set(whole) == allowed, {k: v for k, v in whole.items() if k not in allowed} or allowed - set(whole)
    header = (root / "src" / "train" / "sft_open.h").read_text()
    state = header[header.index("typedef struct {"):header.index("} os_sft_state;")]
    assert not re.search(r"\bos_sft_(args|\w+_opts)\b", state), state
