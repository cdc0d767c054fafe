"""Resume continues the same run: the checkpoint records the data position, so a run resumed at another number of
ranks (or another global batch) reads exactly the samples the uninterrupted run reads, in the order of the sample
permutation (oracle: the Python port in tests/oracle); another dataset or setting is refused naming both values;
the manifest carries a checksum; a save_only_model checkpoint says the optimizer starts from zero; logging.jsonl
holds every step once."""
import json, os, re, subprocess
import numpy as np
import pytest

from oracle import slam_omni_ref as ref
from omni_run import run, weights, rel
from conftest import BIN

N_SAMPLES, SEED = 9, 42
COMMON = ["--learning_rate", "2e-3", "--lr_scheduler_type", "cosine", "--warmup_steps", "1", "--max_length", "64"]
SAMPLES = {"OMNISHARD_LOG_SAMPLES": "1"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("resume")
    ref.make_model(str(d / "model"), hidden=16, layers=1, heads=2, kv_heads=1, inter=32, T=128, A=64, G=3, seed=2)
    ref.make_data(str(d / "data.jsonl"), N_SAMPLES, G=3, T=128, A=64, seed=3)
    ref.make_data(str(d / "other.jsonl"), N_SAMPLES, G=3, T=128, A=64, seed=4)
    return d


def train(d, out, ranks, accum, extra=(), check=True, data="data.jsonl"):
    """ranks x accumulation `accum` x batch 1; ZeRO-3 when ranks > 1"""
    args = ["sft", "--model", d / "model", "--dataset", d / data, "--output_dir", out, *COMMON,
            "--gradient_accumulation_steps", accum, *(["--deepspeed", "zero3"] if ranks > 1 else []), *extra]
    return run(args, np_=ranks if ranks > 1 else None, check=check, env=SAMPLES)


def steps_logged(out):
    return [json.loads(l) for l in open(out / "logging.jsonl") if '"loss"' in l]


def stream(epochs):
    """the oracle's sample order: epoch e visits ref.epoch_perm(n, seed, e)"""
    return [i for e in range(epochs) for i in ref.epoch_perm(N_SAMPLES, SEED, e)]


def expected_steps(gb_per_step, epochs=2):
    """the oracle's samples of each step: GB consecutive positions, cut at each epoch's end"""
    out, e, pos = [], 0, 0
    for gb in gb_per_step:
        perm = ref.epoch_perm(N_SAMPLES, SEED, e)
        out.append(perm[pos:pos + gb])
        pos += len(out[-1])
        if pos == N_SAMPLES:
            e, pos = e + 1, 0
    return out


@pytest.fixture(scope="module")
def straight(tiny):
    """the uninterrupted run: 1 rank, accumulation 2 (global batch 2), 7 steps"""
    out = tiny / "straight"
    train(tiny, out, 1, 2, ["--max_steps", 7, "--save_steps", 0])
    return out


@pytest.mark.parametrize("first,second", [((2, 1), (1, 2)), ((1, 2), (2, 1))])
def test_resume_at_other_rank_count_sees_the_same_samples_and_weights(tiny, straight, first, second):
    """global batch 2 as 2 ranks x 1 or 1 rank x accumulation 2: interrupted at step 3, resumed on the other count
    (into the same output_dir, whose log already holds steps 4-7 of the first attempt)"""
    out = tiny / f"re{first[0]}to{second[0]}"
    train(tiny, out, *first, ["--max_steps", 7, "--save_steps", 3])
    p = train(tiny, out, *second, ["--max_steps", 7, "--save_steps", 3, "--resume_from_checkpoint", out / "checkpoint-3"])
    assert "sample position 6 of 9" in p.stderr, p.stderr
    a, b = steps_logged(straight), steps_logged(out)
    assert [x["step"] for x in b] == list(range(1, 8))          # each step once after the resume
    want = expected_steps([2] * 7)
    assert [x["sample_ids"] for x in a] == want
    assert [x["sample_ids"] for x in b] == want
    wa, wb = weights(straight / "final_model"), weights(out / "final_model")
    for k in wa:
        assert rel(wb[k], wa[k]) <= 1e-5, (k, rel(wb[k], wa[k]))


@pytest.mark.parametrize("first,second,cut", [((2, 1), (1, 1), 3), ((1, 1), (3, 1), 5)])
def test_resume_with_another_global_batch_continues_the_sample_stream(tiny, first, second, cut):
    """2 epochs: the first attempt at global batch first[0], resumed after `cut` steps at global batch second[0]:
    together they read both epochs' permutations exactly once, and the run ends at the end of epoch 2"""
    out = tiny / f"gb{first[0]}to{second[0]}"
    train(tiny, out, *first, ["--num_train_epochs", 2, "--save_steps", cut])
    train(tiny, out / "resumed", *second, ["--num_train_epochs", 2, "--save_steps", 0,
                                           "--resume_from_checkpoint", out / f"checkpoint-{cut}"])
    before = [x["sample_ids"] for x in steps_logged(out)][:cut]
    after = steps_logged(out / "resumed")
    gb1, gb2 = first[0] * first[1], second[0] * second[1]
    assert before == expected_steps([gb1] * cut)
    seen = sum(map(len, before))
    n_after = -(-(N_SAMPLES - seen) // gb2) + -(-N_SAMPLES // gb2)   # rest of epoch 1, then all of epoch 2
    assert [x["step"] for x in after] == list(range(cut + 1, cut + 1 + n_after))
    flat = [i for s in before for i in s] + [i for x in after for i in x["sample_ids"]]
    assert flat == stream(2)
    assert all(len(x["sample_ids"]) <= gb2 for x in after)


@pytest.fixture(scope="module")
def ckpt(tiny):
    out = tiny / "ck"
    train(tiny, out, 1, 1, ["--max_steps", 2, "--save_steps", 2])
    return out / "checkpoint-2"


@pytest.mark.parametrize("flag,value,was", [("--seed", "7", "42"), ("--max_length", "32", "64"),
                                            ("--loss_weights", "1,1,1,1", "0.25,0.25,0.25,0.25"),
                                            ("--code_layer", "2", "3"), ("--model_type", "qwen2", "slam_omni"),
                                            ("--truncation_strategy", "left", "right")])
def test_resume_with_another_setting_is_refused_naming_both_values(tiny, ckpt, tmp_path, flag, value, was):
    p = train(tiny, tmp_path / "o", 1, 1, ["--max_steps", 4, "--resume_from_checkpoint", ckpt, flag, value], check=False)
    assert p.returncode > 0, p.stderr
    assert f"{flag}: {ckpt} was trained with {was}, this run has {value}" in p.stderr, p.stderr
    assert "--resume_override_config" in p.stderr


def test_resume_with_another_dataset_is_refused_naming_both(tiny, ckpt, tmp_path):
    p = train(tiny, tmp_path / "o", 1, 1, ["--max_steps", 4, "--resume_from_checkpoint", ckpt], check=False,
              data="other.jsonl")
    assert p.returncode > 0, p.stderr
    assert re.search(r"--dataset: .* was trained on .*data\.jsonl \(.*\), this run reads .*other\.jsonl \(", p.stderr), p.stderr


def test_every_difference_is_named_in_one_message_the_dataset_included(tiny, ckpt, tmp_path):
    """another --seed, --max_length and another dataset: one message names all three (before, the dataset came
    only in a second message, once the options had been put right)"""
    p = train(tiny, tmp_path / "o", 1, 1, ["--max_steps", 4, "--resume_from_checkpoint", ckpt, "--seed", "7",
                                           "--max_length", "32"], check=False, data="other.jsonl")
    assert p.returncode > 0, p.stderr
    msg = [l for l in p.stderr.splitlines() if "resume: " in l]
    assert len(msg) == 1, p.stderr
    assert f"--seed: {ckpt} was trained with 42, this run has 7" in msg[0], p.stderr
    assert f"--max_length: {ckpt} was trained with 64, this run has 32" in msg[0], p.stderr
    assert re.search(r"--dataset: .* was trained on .*data\.jsonl \(.*\), this run reads .*other\.jsonl \(", msg[0]), p.stderr


def test_override_continues_with_a_warning(tiny, ckpt, tmp_path):
    p = train(tiny, tmp_path / "o", 1, 1, ["--max_steps", 4, "--resume_from_checkpoint", ckpt, "--seed", "7",
                                           "--resume_override_config", "true"])
    assert "WARNING" in p.stderr and "--seed" in p.stderr and "42" in p.stderr and "this run has 7" in p.stderr
    assert [x["step"] for x in steps_logged(tmp_path / "o")] == [3, 4]


def test_corrupt_manifest_is_refused_naming_the_file(tiny, ckpt, tmp_path):
    import shutil
    bad = tmp_path / "checkpoint-2"
    shutil.copytree(ckpt, bad)
    text = open(bad / "manifest.json").read()
    text = re.sub(r'"step":(\s*)2', r'"step":\g<1>1', text, count=1)   # still valid JSON, still a sane step
    open(bad / "manifest.json", "w").write(text)
    for args in (["sft", "--model", tiny / "model", "--dataset", tiny / "data.jsonl", "--output_dir", tmp_path / "o",
                  "--max_steps", 4, "--resume_from_checkpoint", bad],
                 ["export", "--checkpoint", bad, "--output_dir", tmp_path / "e"]):
        p = run(args, check=False)
        assert p.returncode > 0, p.stderr
        assert f"{bad}/manifest.json" in p.stderr and "corrupt manifest" in p.stderr, p.stderr


def test_save_only_model_resume_says_optimizer_starts_from_zero(tiny, tmp_path):
    out = tmp_path / "o"
    train(tiny, out, 1, 1, ["--max_steps", 2, "--save_steps", 2, "--save_only_model", "true"])
    p = train(tiny, out, 1, 1, ["--max_steps", 3, "--resume_from_checkpoint", out / "checkpoint-2"])
    assert "no optimizer state" in p.stderr and "START FROM ZERO" in p.stderr, p.stderr
    assert [x["step"] for x in steps_logged(out)] == [1, 2, 3]


def test_log_cut_by_a_crash_holds_each_step_once(tiny, tmp_path):
    """the process vanishes during step 5 (after checkpoint-3 and the log lines of steps 1-4); resumed from
    checkpoint-3 the log holds steps 1-6 once each, steps 4-5 from the resumed run"""
    out = tmp_path / "o"
    p = run(["sft", "--model", tiny / "model", "--dataset", tiny / "data.jsonl", "--output_dir", out, *COMMON,
             "--max_steps", 6, "--save_steps", 3], check=False, env={"OMNISHARD_FAULT": "0:5:exit"})
    assert p.returncode != 0
    with open(out / "logging.jsonl", "a") as f:
        f.write('{"step": 5, "epo')   # a line cut mid-write
    train(tiny, out, 1, 1, ["--max_steps", 6, "--save_steps", 3, "--resume_from_checkpoint", out / "checkpoint-3"])
    lines = [json.loads(l) for l in open(out / "logging.jsonl")]
    assert [x["step"] for x in lines] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("how", ["true", "run_dir"])
def test_resume_true_or_a_run_directory_takes_its_latest_complete_checkpoint(tiny, tmp_path, how):
    """Hugging Face's --resume_from_checkpoint true (issue 27): the latest complete checkpoint of --output_dir (here
    checkpoint-4: the run vanished in step 5, and checkpoint-9 has no manifest: incomplete); a run directory as
    the value means the same; false means no resume"""
    out = tmp_path / "o"
    p = run(["sft", "--model", tiny / "model", "--dataset", tiny / "data.jsonl", "--output_dir", out, *COMMON,
             "--max_steps", 6, "--save_steps", 2], check=False, env={"OMNISHARD_FAULT": "0:5:exit"})
    assert p.returncode != 0 and (out / "checkpoint-4" / "manifest.json").exists()
    os.makedirs(out / "checkpoint-9")
    value = "true" if how == "true" else out
    p = train(tiny, out, 1, 1, ["--max_steps", 6, "--save_steps", 2, "--resume_from_checkpoint", value])
    assert f"resumed from {out}/checkpoint-4 at step 4" in p.stderr, p.stderr
    assert [x["step"] for x in steps_logged(out)] == [1, 2, 3, 4, 5, 6]
    empty = tmp_path / "empty"
    p = train(tiny, empty, 1, 1, ["--max_steps", 1, "--resume_from_checkpoint", "true"], check=False)
    assert p.returncode == 2 and f"--resume_from_checkpoint true: {empty} holds no complete checkpoint" in p.stderr, p.stderr
    p = train(tiny, empty, 1, 1, ["--max_steps", 1, "--resume_from_checkpoint", "false"])
    assert "resumed" not in p.stderr and [x["step"] for x in steps_logged(empty)] == [1]


def test_several_differing_settings_are_all_named(tiny, ckpt, tmp_path):
    p = train(tiny, tmp_path / "o", 1, 1, ["--max_steps", 4, "--resume_from_checkpoint", ckpt, "--seed", "7",
                                           "--max_length", "32", "--truncation_strategy", "left"], check=False)
    assert p.returncode > 0, p.stderr
    for flag, was, value in (("--seed", "42", "7"), ("--max_length", "64", "32"), ("--truncation_strategy", "right", "left")):
        assert f"{flag}: {ckpt} was trained with {was}, this run has {value}" in p.stderr, p.stderr


def checkpoints(out):
    return sorted(int(c.name.split("-")[1]) for c in out.iterdir()
                  if re.fullmatch(r"checkpoint-\d+", c.name) and (c / "manifest.json").exists())


def test_save_total_limit_after_a_resume_counts_only_this_runs_lineage(tiny, tmp_path):
    """issue 24: run A saves 1..8; run B resumes A's checkpoint-2 in the same directory with --save_total_limit 2.
    A's 6, 7, 8 are an abandoned branch: reported at start-up, never counted, never removed; B keeps its newest two
    (4, 5; its 3, 4, 5 replaced A's). Before: retention kept 7 and 8 by step and removed every checkpoint B wrote.
    Then --resume_from_checkpoint true takes B's latest (5), not the abandoned branch's higher 8."""
    out = tmp_path / "o"
    train(tiny, out, 1, 1, ["--max_steps", 8, "--save_steps", 1])
    a_ids = {json.load(open(out / f"checkpoint-{s}" / "manifest.json"))["run_id"] for s in range(1, 9)}
    assert len(a_ids) == 1
    p = train(tiny, out, 1, 1, ["--max_steps", 5, "--save_steps", 1, "--save_total_limit", 2,
                                "--resume_from_checkpoint", out / "checkpoint-2"])
    assert checkpoints(out) == [4, 5, 6, 7, 8], p.stderr
    assert re.search(r"checkpoint-6, checkpoint-7, checkpoint-8 in \S+ are not of this run's lineage", p.stderr), p.stderr
    b = json.load(open(out / "checkpoint-5" / "manifest.json"))
    assert b["run_id"] not in a_ids and b["lineage"] == f"{a_ids.pop()}@2"
    p = train(tiny, out, 1, 1, ["--max_steps", 6, "--save_steps", 0, "--resume_from_checkpoint", "true"])
    assert f"resumed from {out}/checkpoint-5 at step 5" in p.stderr, p.stderr


def test_retention_reads_the_log_once(tiny, tmp_path):
    """the best eval_loss is kept as the run goes: logging.jsonl is read (at most) once at start-up, not at every
    save (before: the whole log on rank 0 at every save, memory growing with the log)"""
    out = tmp_path / "o"
    val = ["--val_dataset", tiny / "other.jsonl", "--eval_steps", 1]
    train(tiny, out, 1, 1, ["--max_steps", 2, "--save_steps", 1, "--save_total_limit", 1, *val])
    args = ["sft", "--model", tiny / "model", "--dataset", tiny / "data.jsonl", "--output_dir", out, *COMMON,
            "--max_steps", 7, "--save_steps", 1, "--save_total_limit", 1, *val, "--resume_from_checkpoint", out / "checkpoint-2"]
    trace = tmp_path / "trace"
    p = subprocess.run(["strace", "-f", "-e", "trace=open,openat", "-o", str(trace), str(BIN), *map(str, args)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    reads = [l for l in open(trace) if "logging.jsonl" in l and "O_RDONLY" in l and "O_CREAT" not in l]
    assert len(reads) <= 2, reads   # start-up: the keeper's read, the log's own check on resume
    ev = {x["step"]: x["eval_loss"] for x in map(json.loads, open(out / "logging.jsonl")) if "eval_loss" in x}
    best = min(ev, key=lambda s: (ev[s], s))
    assert checkpoints(out) == sorted({7, best}), (ev, checkpoints(out))


def test_every_file_of_a_checkpoint_is_checksummed(tiny, ckpt, tmp_path):
    """issue 24: config.json and slam_omni.json (and any tokenizer file) of a checkpoint are in its manifest; an
    edited rms_norm_eps is refused by export and by a resume, naming the file (before: exported with exit 0)"""
    import shutil
    listed = {f["name"] for f in json.load(open(ckpt / "manifest.json"))["model_files"]}
    on_disk = {p.name for p in ckpt.iterdir() if p.name != "manifest.json" and not p.name.startswith("rank-")}
    assert on_disk == listed and {"config.json", "slam_omni.json"} <= listed, (listed, on_disk)
    for name, edit in (("config.json", lambda c: c.update(rms_norm_eps=c["rms_norm_eps"] * 10)),
                       ("slam_omni.json", lambda c: c.update(code_layer=c["code_layer"]))):   # rewritten: other bytes
        bad = tmp_path / name / "checkpoint-2"
        shutil.copytree(ckpt, bad)
        c = json.load(open(bad / name))
        edit(c)
        json.dump(c, open(bad / name, "w"), indent=1)
        for args in (["export", "--checkpoint", bad, "--output_dir", tmp_path / name / "e"],
                     ["sft", "--model", tiny / "model", "--dataset", tiny / "data.jsonl", "--output_dir", bad.parent,
                      *COMMON, "--max_steps", 3, "--resume_from_checkpoint", bad]):
            p = run(args, check=False)
            assert p.returncode > 0, p.stderr
            assert f"{bad}/{name}: size" in p.stderr and "do not match the manifest's" in p.stderr, p.stderr
        assert not (tmp_path / name / "e").exists()
