"""Several datasets mixed as ms-swift takes them (`--dataset A#N B`, docs/dataset.md "Mixing datasets"): the mix is
the same on every rank (2 ranks train exactly as 1 rank with accumulation 2), another --data_seed gives another
run, PATH#N above the file's size repeats it, a resumed mixed run continues exactly, the resume refuses another
sampling, --val_dataset mixes too, and a bad line is named with its own file. The sampling itself (ms-swift's
sample_dataset: whole copies, then distinct samples) is checked sample by sample in tests/unit/test_mix.c."""
import json, os
import pytest

from oracle import slam_omni_ref as ref
from omni_run import run, weights, rel

COMMON = ["--learning_rate", "2e-3", "--warmup_steps", "1", "--max_length", "64"]
SAMPLES = {"OMNISHARD_LOG_SAMPLES": "1"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("mix")
    ref.make_model(str(d / "model"), hidden=16, layers=1, heads=2, kv_heads=1, inter=32, T=128, A=64, G=3, seed=2)
    ref.make_data(str(d / "a.jsonl"), 3, G=3, T=128, A=64, seed=3)
    ref.make_data(str(d / "b.jsonl"), 5, G=3, T=128, A=64, seed=4)
    return d


def train(d, out, ranks, accum, data, extra=(), check=True):
    args = ["sft", "--model", d / "model", "--dataset", *data, "--output_dir", out, *COMMON,
            "--gradient_accumulation_steps", accum, *(["--deepspeed", "zero3"] if ranks > 1 else []), *extra]
    return run(args, np_=ranks if ranks > 1 else None, check=check, env=SAMPLES)


def steps(out):
    return [json.loads(l) for l in open(out / "logging.jsonl") if '"loss"' in l]


def mix(d, n=7):
    return [f"{d / 'a.jsonl'}#{n}", d / "b.jsonl"]


@pytest.fixture(scope="module")
def straight(tiny):
    out = tiny / "straight"
    p = train(tiny, out, 1, 2, mix(tiny), ["--max_steps", 6, "--save_steps", 0])
    assert "12 samples" in p.stderr, p.stderr   # a (3 samples) #7 with replacement, and b's 5
    return out


def test_two_ranks_build_the_same_mix(tiny, straight):
    """each rank samples and mixes on its own: 2 ranks x 1 must read and train exactly what 1 rank x 2 does"""
    out = tiny / "two"
    train(tiny, out, 2, 1, mix(tiny), ["--max_steps", 6, "--save_steps", 0])
    a, b = steps(straight), steps(out)
    assert [x["sample_ids"] for x in a] == [x["sample_ids"] for x in b]
    for x, y in zip(a, b):
        assert abs(x["loss"] - y["loss"]) <= 1e-5 * abs(x["loss"]), (x, y)
    wa, wb = weights(straight / "final_model"), weights(out / "final_model")
    for k in wa:
        assert rel(wb[k], wa[k]) <= 1e-5, (k, rel(wb[k], wa[k]))


def test_another_data_seed_is_another_run(tiny, straight):
    out = tiny / "seed7"
    train(tiny, out, 1, 2, mix(tiny), ["--max_steps", 6, "--save_steps", 0, "--data_seed", 7])
    assert [x["loss"] for x in steps(out)] != [x["loss"] for x in steps(straight)]
    args = json.load(open(out / "args.json"))
    assert args["data_seed"] == 7 and args["seed"] == 42 and args["dataset_shuffle"] is True


def test_resumed_mixed_run_is_exact(tiny, straight):
    """interrupted at step 3 (1 rank), resumed on 2 ranks: the same samples and the same weights"""
    out = tiny / "resumed"
    train(tiny, out, 1, 2, mix(tiny), ["--max_steps", 6, "--save_steps", 3])
    train(tiny, out, 2, 1, mix(tiny), ["--max_steps", 6, "--save_steps", 3, "--resume_from_checkpoint", out / "checkpoint-3"])
    assert [x["sample_ids"] for x in steps(out)] == [x["sample_ids"] for x in steps(straight)]
    wa, wb = weights(straight / "final_model"), weights(out / "final_model")
    for k in wa:
        assert rel(wb[k], wa[k]) <= 1e-5, (k, rel(wb[k], wa[k]))


@pytest.mark.parametrize("data,extra", [("n6", []), ("mix", ["--dataset_shuffle", "false"]), ("mix", ["--data_seed", "7"]),
                                        ("b_a", [])])
def test_resume_refuses_another_sampling(tiny, tmp_path, data, extra):
    ck = tiny / "straight_ck"
    if not (ck / "checkpoint-2").exists():
        train(tiny, ck, 1, 1, mix(tiny), ["--max_steps", 2, "--save_steps", 2])
    specs = {"n6": mix(tiny, 6), "mix": mix(tiny), "b_a": mix(tiny)[::-1]}[data]
    p = train(tiny, tmp_path / "o", 1, 1, specs, ["--max_steps", 4, "--resume_from_checkpoint", ck / "checkpoint-2", *extra],
              check=False)
    named = "--data_seed: " if "--data_seed" in extra else "--dataset: "   # (the seed is checked before the data is read)
    assert p.returncode > 0 and named in p.stderr and "--resume_override_config" in p.stderr, p.stderr


def test_val_dataset_mix(tiny, tmp_path):
    out = tmp_path / "o"
    train(tiny, out, 1, 1, [tiny / "b.jsonl"], ["--max_steps", 1, "--val_dataset", f"{tiny / 'a.jsonl'}#2",
                                                f"{tiny / 'b.jsonl'}#7"])
    ev = [json.loads(l) for l in open(out / "logging.jsonl") if '"eval_loss"' in l]
    assert ev and ev[-1]["eval_samples"] == 9


def test_a_bad_line_is_named_with_its_own_file(tiny, tmp_path):
    bad = tmp_path / "bad.jsonl"
    lines = open(tiny / "b.jsonl").read().splitlines()
    bad.write_text(lines[0] + "\n" + lines[1][:40] + "\n")
    p = train(tiny, tmp_path / "o", 1, 1, [f"{tiny / 'a.jsonl'}#4", bad], ["--max_steps", 1], check=False)
    assert p.returncode > 0 and f"{bad}:2:" in p.stderr, p.stderr


def test_hash_zero_is_refused(tiny, tmp_path):
    p = train(tiny, tmp_path / "o", 1, 1, [f"{tiny / 'a.jsonl'}#0"], ["--max_steps", 1], check=False)
    assert p.returncode > 0 and "#0" in p.stderr and "1 <= N" in p.stderr, p.stderr


def test_speech_inputs_of_every_file(tmp_path):
    """two files whose spoken samples name different WAVs, mixed in file order, train exactly as one file holding
    both (a sample's WAV is looked up in its own file: a wrong wav_index gives another speech input, another loss)"""
    from test_speech_train import write_wav, write_data, G, T, A, HID
    d = tmp_path
    ref.make_model(str(d / "model"), hidden=32, layers=1, heads=4, kv_heads=2, inter=48, T=T, A=A, G=G, tied=True, seed=0)
    ref.add_projector(str(d / "model"), 16, HID, 32)
    ref.make_encoder(str(d / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    write_wav(d / "low.wav", 0.3, 300, seed=1), write_wav(d / "high.wav", 0.6, 900, seed=2)
    write_data(d / "s1.jsonl", 2, {0: "low.wav", 1: "low.wav"}, seed=5)
    write_data(d / "s2.jsonl", 2, {0: "high.wav", 1: "high.wav"}, seed=6)
    (d / "both.jsonl").write_text(open(d / "s1.jsonl").read() + open(d / "s2.jsonl").read())
    common = ["--speech_encoder", d / "enc", "--max_steps", 2, "--per_device_train_batch_size", 2, "--max_length", 64]
    run(["sft", "--model", d / "model", "--dataset", d / "s1.jsonl", d / "s2.jsonl", "--dataset_shuffle", "false",
         "--output_dir", d / "mixed", *common])
    run(["sft", "--model", d / "model", "--dataset", d / "both.jsonl", "--output_dir", d / "one", *common])
    a, b = steps(d / "mixed"), steps(d / "one")
    assert [x["loss"] for x in a] == [x["loss"] for x in b]


def test_a_mix_larger_than_the_hosts_memory_is_refused_at_once(tiny, tmp_path):
    """a.jsonl#N with N samples' tables 1.5 times the host's available memory (the issue's #1000000000 on a 23 GB
    host): one table entry per sample is needed (the run's order of samples), bounded by the host's available memory
    with a message naming the count and the bytes, in seconds (before: the tables took the host's memory until the
    OOM killer ended the run; do not run this test against such a build)"""
    import re, time
    avail = int(re.search(r"MemAvailable:\s+(\d+) kB", open("/proc/meminfo").read()).group(1)) * 1024
    n = avail * 3 // 80   # 40 bytes per sample (shuffled): 1.5 x what is available
    t = time.monotonic()
    p = train(tiny, tmp_path / "o", 1, 1, [f"{tiny / 'a.jsonl'}#{n}", tiny / "b.jsonl"], ["--max_steps", 1],
              check=False)
    assert p.returncode == 1 and time.monotonic() - t < 60, p.stderr
    assert f"{n + 5} samples; their tables" in p.stderr and "40 bytes per sample) need" in p.stderr, p.stderr
    assert "give a smaller #N" in p.stderr and not (tmp_path / "o" / "logging.jsonl").exists()


def test_sigterm_during_the_start_up_stops_before_the_first_step(tiny, tmp_path):
    """a SIGTERM that arrives while the datasets are opened (the test hook OMNISHARD_FAULT=0:-1:term raises it just
    before): the mix of 20 million samples is not finished, the run ends with 143 and the line saying so, and leaves
    nothing that would block the same command later"""
    out = tmp_path / "o"
    p = run(["sft", "--model", tiny / "model", "--dataset", f"{tiny / 'a.jsonl'}#20000000", tiny / "b.jsonl",
             "--output_dir", out, *COMMON, "--max_steps", 1], check=False,
            env={"OMNISHARD_FAULT": "0:-1:term"}, timeout=120)
    assert p.returncode == 143, p.stderr
    assert "SIGTERM received while building the mixed dataset's sample list (0 of 20000000 samples): stopped before " \
           "the first step" in p.stderr, p.stderr
    assert "omnishard sft: stopped (error) before the first step" not in p.stderr
    assert sorted(os.listdir(out)) == [".omnishard.lock"]
    train(tiny, out, 1, 1, mix(tiny), ["--max_steps", 1])
