"""ms-swift's everyday sft flags (issue 22, item 5; docs/training.md "ms-swift's sft options"): --system,
--save_strategy / --eval_strategy (steps, epoch, no), --resume_only_model, --attn_impl."""
import json, os, re

import pytest
from safetensors.numpy import load_file

from oracle import slam_samples_ref as ref
from omni_run import logs, run, sft, tiny_slam, weights
from conftest import ROOT
from test_input_checks import help_options, parse_error

T, A = 512, 80


@pytest.fixture(scope="module")
def slam(tmp_path_factory):
    d = tmp_path_factory.mktemp("slam")
    ref.make_model_dir(str(d / "model"), T=T, A=A, G=3, hidden=16, layers=1, heads=2, kv_heads=1, inter=32)
    return d


def with_system(records, prompt):
    return [dict(r, system_prompt=prompt) for r in records]


def test_system_overrides_the_task_default_and_a_record_keeps_its_own(slam, tmp_path):
    """--system X trains exactly as records carrying system_prompt X; a record's own system_prompt wins over
    --system (ms-swift: the dataset's system first); without --system the task's default prompt is used."""
    recs = ref.make_records(3, A=A, seed=4)
    X, Y = "You answer in one short sentence. ", "A record's own prompt. "
    files = {"plain": recs, "x": with_system(recs, X), "mixed": recs[:1] + with_system(recs[1:], Y)}
    for name, rs in files.items():
        ref.write_jsonl(tmp_path / f"{name}.jsonl", rs)
    m = str(slam / "model")
    common = ["--max_length", 4096, "--per_device_train_batch_size", 3, "--logging_steps", 1]

    def loss(data, *extra):
        out = tmp_path / f"o-{data}-{len(extra)}"
        sft(m, str(tmp_path / f"{data}.jsonl"), str(out), 1, [*common, *extra])
        return logs(out)[0]["loss"]

    given = loss("plain", "--system", X)
    assert given == loss("x")                 # --system X == every record saying X
    assert given != loss("plain")             # and it changed what was trained on (the task default otherwise)
    ref.write_jsonl(tmp_path / "mixed_want.jsonl", with_system(recs[:1], X) + with_system(recs[1:], Y))
    assert loss("mixed", "--system", X) == loss("mixed_want")   # records with their own prompt keep it
    args = json.load(open(tmp_path / "o-plain-2" / "args.json"))
    assert args["system"] == X


def test_a_resume_keeps_the_system_prompt(slam, tmp_path):
    """--system changes the samples: a resume with another one is refused as another dataset would be"""
    data = tmp_path / "d.jsonl"
    ref.write_jsonl(data, ref.make_records(2, A=A, seed=5))
    m, out = str(slam / "model"), tmp_path / "o"
    sft(m, str(data), str(out), 1, ["--max_length", 4096, "--save_steps", 1])
    p = sft(m, str(data), str(out), 2, ["--max_length", 4096, "--resume_from_checkpoint", "true", "--system", "Be brief. "],
            check=False)
    assert p.returncode != 0
    assert f"--system: {out}/checkpoint-1 was trained with (the task's default), this run has Be brief. " in p.stderr, p.stderr
    sft(m, str(data), str(out), 2, ["--max_length", 4096, "--resume_from_checkpoint", "true"])   # the same: resumes


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_slam(tmp_path_factory, "strategies", 4, val_samples=2)


def epochs_run(tiny, out, *extra):
    """2 epochs of 4 samples, batch 2: 4 steps, the epochs end at steps 2 and 4"""
    return sft(str(tiny / "model"), str(tiny / "data.jsonl"), str(out), 0,
               ["--num_train_epochs", 2, "--per_device_train_batch_size", 2, "--val_dataset", str(tiny / "val.jsonl"),
                *extra])


def checkpoints(out):
    return sorted(int(n.split("-")[1]) for n in os.listdir(out) if n.startswith("checkpoint-"))


def eval_steps(out):
    return [l["step"] for l in logs(out) if "eval_loss" in l]


@pytest.mark.parametrize("save,evaluate,saved,evaluated", [
    ("steps", "steps", [1, 2, 3, 4], [1, 2, 3, 4]),   # --save_steps 1 --eval_steps 1 as before
    ("epoch", "epoch", [2, 4], [2, 4]),
    ("no", "no", [], []),
    ("epoch", "steps", [2, 4], [1, 2, 3, 4]),
])
def test_save_and_eval_strategies(tiny, tmp_path, save, evaluate, saved, evaluated):
    out = tmp_path / "o"
    epochs_run(tiny, out, "--save_steps", 1, "--eval_steps", 1, "--save_strategy", save, "--eval_strategy", evaluate)
    assert checkpoints(out) == saved
    assert eval_steps(out) == evaluated
    assert os.path.exists(out / "final_model" / "model.safetensors")   # final_model is written under every strategy
    assert [l["step"] for l in logs(out) if "loss" in l and "eval_loss" not in l] == [1, 2, 3, 4]


def test_resume_only_model_loads_the_parameters_only(tiny, tmp_path):
    """--resume_only_model from a full checkpoint == resuming a --save_only_model checkpoint of the same step
    (parameters, zero AdamW moments, step and data position kept); != the full resume, whose moments continue."""
    m, d = str(tiny / "model"), str(tiny / "data.jsonl")
    full, only = tmp_path / "full", tmp_path / "only"
    base = ["--save_steps", 1, "--per_device_train_batch_size", 2]
    sft(m, d, str(full), 1, base)
    sft(m, d, str(only), 1, [*base, "--save_only_model", "true"])
    got, want, cont = tmp_path / "got", tmp_path / "want", tmp_path / "cont"
    sft(m, d, str(got), 3, [*base, "--resume_from_checkpoint", str(full / "checkpoint-1"), "--resume_only_model"])
    sft(m, d, str(want), 3, [*base, "--resume_from_checkpoint", str(only / "checkpoint-1")])
    sft(m, d, str(cont), 3, [*base, "--resume_from_checkpoint", str(full / "checkpoint-1")])
    wg, ww, wc = (weights(str(o / "final_model")) for o in (got, want, cont))
    assert all((wg[k] == ww[k]).all() for k in ww)
    assert any((wg[k] != wc[k]).any() for k in wc)
    assert [l["step"] for l in logs(got)] == [2, 3]   # the step continues (and the log of the resumed run starts at 2)
    assert [l["loss"] for l in logs(got)] == [l["loss"] for l in logs(want)]


def test_resume_only_model_needs_a_checkpoint(tmp_path):
    err = parse_error(tmp_path, "--resume_only_model", "true")
    assert "--resume_only_model true needs --resume_from_checkpoint" in err, err


@pytest.mark.parametrize("value", ["flash_attn", "flash_attention_2"])
def test_flash_attention_is_refused_on_the_cpu(tmp_path, value):
    err = parse_error(tmp_path, "--attn_impl", value)
    assert f"--attn_impl {value}: FlashAttention runs on CUDA GPUs only" in err and "sdpa or eager" in err, err


def test_attn_impl_values(tmp_path):
    for ok in ("sdpa", "eager"):
        assert "nomodel/config.json" in parse_error(tmp_path, "--attn_impl", ok)
    err = parse_error(tmp_path, "--attn_impl", "xformers")
    assert "--attn_impl: 'xformers' is not supported (supported: sdpa, eager, flash_attn or flash_attention_2)" in err


@pytest.mark.parametrize("name", ["save_strategy", "eval_strategy"])
def test_a_strategy_outside_the_list_is_refused(tmp_path, name):
    err = parse_error(tmp_path, f"--{name}", "best")
    assert f"--{name}: 'best' is not supported (supported: steps, epoch or no)" in err, err


def swift_table():
    doc = open(ROOT / "docs" / "training.md").read()
    part = doc.split("## ms-swift's sft options", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `--(\w+)` \| (honoured|values|as `--\w+`|rejected|no effect) \|", part, re.M)


def swift_reasons():
    """the rejected and no-effect rows: name -> (what, why)"""
    doc = open(ROOT / "docs" / "training.md").read()
    part = doc.split("## ms-swift's sft options", 1)[1].split("\n## ", 1)[0]
    return {n: (w, why) for n, w, why in re.findall(r"^\| `--(\w+)` \| (rejected|no effect) \| (.*) \|$", part, re.M)}


def test_the_ms_swift_options_table(tmp_path):
    """docs/training.md "ms-swift's sft options": honoured and values options are sft's, an "as" target is sft's,
    a rejected one is refused at once (every unknown option is named in the one message)"""
    rows = swift_table()
    assert len(rows) > 100 and len({n for n, _ in rows}) == len(rows)
    known = {n for n, _ in help_options()}
    for name, what in rows:
        if what in ("honoured", "values"):
            assert name in known, name
        elif what.startswith("as"):
            assert name not in known and what[6:-1] in known, (name, what)
    rejected = [n for n, w in rows if w == "rejected"]
    for i in range(0, len(rejected), 8):   # a few per run: the message has a bounded length
        some = rejected[i:i + 8]
        err = parse_error(tmp_path, *[x for n in some for x in (f"--{n}", "1")])
        for n in some:
            assert f"unknown option '--{n}'" in err, (n, err)


def test_every_rejected_option_says_why(tmp_path):
    """each rejected ms-swift option's error line gives the docs table's reason (what to do), at sft and plan"""
    rows = swift_reasons()
    rejected = sorted(n for n, (w, _) in rows.items() if w == "rejected")
    assert len(rejected) > 40 and {"streaming", "padding_free", "template"} <= set(rejected)
    for i in range(0, len(rejected), 8):   # a few per run: the message has a bounded length
        some = rejected[i:i + 8]
        err = parse_error(tmp_path, *[x for n in some for x in (f"--{n}", "1")])
        for n in some:
            assert f"unknown option '--{n}' (ms-swift's; not in omnishard): {rows[n][1]}" in err, (n, err)
    p = run(["plan", "--model", "qwen2.5-0.5b", "--streaming", "true"], check=False, timeout=60)
    assert p.returncode != 0 and f"unknown option '--streaming' (ms-swift's; not in omnishard): {rows['streaming'][1]}" in p.stderr


def test_options_with_no_effect_are_accepted_with_a_note(tmp_path, tiny):
    """each no-effect option, in every spelling a value takes (--x V, --x=V, bare), trains as without it, with one
    note per option naming the docs table's reason, printed by rank 0 only; plan takes them too"""
    rows = swift_reasons()
    noop = sorted(n for n, (w, _) in rows.items() if w == "no effect")
    assert {"dataloader_num_workers", "dataset_num_proc", "load_from_cache_file"} <= set(noop)
    args = []
    for k, n in enumerate(noop):
        args += [[f"--{n}", "4"], [f"--{n}=true"], [f"--{n.replace('_', '-')}"]][k % 3]
    m, d = str(tiny / "model"), str(tiny / "data.jsonl")
    p = sft(m, d, str(tmp_path / "with"), 1, args, np_=2)
    sft(m, d, str(tmp_path / "without"), 1, np_=2)
    assert logs(tmp_path / "with")[0]["loss"] == logs(tmp_path / "without")[0]["loss"]
    for n in noop:
        note = f"omnishard sft: --{n} accepted, no effect here: {rows[n][1]}"
        assert p.stderr.count(note) == 1, (n, p.stderr)
    p = run(["plan", "--model", "qwen2.5-0.5b", "--dataloader_num_workers", "8"], timeout=60)
    assert f"--dataloader_num_workers accepted, no effect here: {rows['dataloader_num_workers'][1]}" in p.stderr


def test_the_source_table_and_the_docs_table_name_the_same_options():
    """src/train/swift_options.c (the one table the parser reads) has a row here for every name, and the other way"""
    src = open(ROOT / "src" / "train" / "swift_options.c").read()
    names = re.findall(r'^\s*\{"(\w+)",', src, re.M)
    assert len(names) == len(set(names)) and set(names) == set(swift_reasons()), set(names) ^ set(swift_reasons())
