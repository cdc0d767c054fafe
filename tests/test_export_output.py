"""omnishard export --output_dir deletes nothing the user did not ask to delete (issue 24, defect 1): a non-empty
directory is an error naming it unless --overwrite_output_dir true, and never (not even then) a directory that holds
the checkpoint being read or any checkpoint. OUT.tmp.PID and final_model.tmp.PID left by a kill are removed."""
import os, shutil
import pytest

from omni_run import run, sft, tiny_slam, weights


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tiny_slam(tmp_path_factory, "exportdest", 4)
    sft(d / "model", d / "data.jsonl", d / "out", 2, ["--save_steps", "1", "--max_length", "64"])
    return d


def export(ck, out, *extra, check=False):
    return run(["export", "--checkpoint", ck, "--output_dir", out, *extra], check=check, timeout=120)


def snapshot(d):
    return sorted((str(p.relative_to(d)), p.stat().st_size) for p in d.rglob("*"))


def test_the_runs_own_directory_is_never_replaced(trained, tmp_path):
    # the campaign's command: cp -a out x && omnishard export --checkpoint x/checkpoint-2 --output_dir x
    x = tmp_path / "x"
    shutil.copytree(trained / "out", x)
    before = snapshot(x)
    for extra in ([], ["--overwrite_output_dir", "true"]):
        p = export(x / "checkpoint-2", x, *extra)
        assert p.returncode != 0, p.stderr
        assert f"--output_dir {x}: holds the checkpoint being read" in p.stderr, p.stderr
        assert snapshot(x) == before
    p = export(x / "checkpoint-2", str(x) + "/", "--overwrite_output_dir", "true")   # however spelt
    assert p.returncode != 0 and "holds the checkpoint being read" in p.stderr, p.stderr
    assert snapshot(x) == before


def test_a_directory_with_any_checkpoint_is_never_replaced(trained, tmp_path):
    y = tmp_path / "y"
    shutil.copytree(trained / "out" / "checkpoint-1", y / "v1-run" / "checkpoint-1")
    before = snapshot(y)
    p = export(trained / "out" / "checkpoint-2", y, "--overwrite_output_dir", "true")
    assert p.returncode != 0
    assert f"--output_dir {y}: holds a checkpoint ({y}/v1-run/checkpoint-1)" in p.stderr, p.stderr
    assert snapshot(y) == before


def test_a_non_empty_directory_needs_overwrite(trained, tmp_path):
    z = tmp_path / "z"
    z.mkdir()
    (z / "notes.txt").write_text("mine")
    p = export(trained / "out" / "checkpoint-2", z)
    assert p.returncode != 0
    assert f"--output_dir {z}: exists and is not empty (notes.txt)" in p.stderr and "--overwrite_output_dir true" in p.stderr
    assert (z / "notes.txt").read_text() == "mine" and not (z / "model.safetensors").exists()
    export(trained / "out" / "checkpoint-2", z, "--overwrite_output_dir", "true", check=True)
    assert not (z / "notes.txt").exists()
    wa, wb = weights(z), weights(trained / "out" / "final_model")
    assert set(wa) == set(wb) and all((wa[k] == wb[k]).all() for k in wa)


def test_an_empty_or_new_directory_is_written(trained, tmp_path):
    (tmp_path / "e").mkdir()
    export(trained / "out" / "checkpoint-2", tmp_path / "e", check=True)
    export(trained / "out" / "checkpoint-2", tmp_path / "n", check=True)
    assert (tmp_path / "e" / "model.safetensors").exists() and (tmp_path / "n" / "model.safetensors").exists()


def dead_pid():
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
            pid += 1
        except ProcessLookupError:
            return pid
        except PermissionError:
            pid += 1


def test_temporaries_of_a_killed_export_or_run_are_removed(trained, tmp_path):
    # the directories a kill -9 leaves: OUT.tmp.PID beside an export's OUT, final_model.tmp.PID in a run's OUTPUT_DIR
    stale = tmp_path / f"o.tmp.{dead_pid()}"
    live = tmp_path / f"o.tmp.{os.getpid()}"   # a live process's: another export still writing
    for t in (stale, live):
        t.mkdir()
        (t / "model.safetensors").write_bytes(b"partial")
    p = export(trained / "out" / "checkpoint-2", tmp_path / "o", check=True)
    assert not stale.exists() and live.exists()
    assert f"removed {stale}" in p.stderr, p.stderr
    out = tmp_path / "run"
    shutil.copytree(trained / "out", out)
    fm = out / f"final_model.tmp.{dead_pid()}"
    fm.mkdir()
    p = sft(trained / "model", trained / "data.jsonl", out, 3,
            ["--save_steps", "1", "--max_length", "64", "--resume_from_checkpoint", out / "checkpoint-2"])
    assert not fm.exists(), p.stderr
    assert f"removed {fm}" in p.stderr


def test_ms_swifts_export_line(trained, tmp_path):
    """`swift export --adapters CKPT --merge_lora true`: --adapters is --checkpoint, and without --output_dir the model
    goes to CKPT-merged beside the checkpoint, as ms-swift writes it; the same files as --checkpoint/--output_dir"""
    d = trained
    sft(d / "model", d / "data.jsonl", tmp_path / "lora", 2, ["--save_steps", "2", "--max_length", "64",
                                                              "--train_type", "lora", "--lora_rank", "4"])
    ck = tmp_path / "lora" / "checkpoint-2"
    p = run(["export", "--adapters", str(ck) + "/", "--merge_lora", "true"], timeout=120)
    merged = tmp_path / "lora" / "checkpoint-2-merged"
    assert f"written to {merged}" in p.stderr, p.stderr
    export(ck, tmp_path / "want", check=True)
    wa, wb = weights(merged), weights(tmp_path / "want")
    assert set(wa) == set(wb) and all((wa[k] == wb[k]).all() for k in wa)
    p = run(["export", "--adapters", ck, "--merge_lora", "false"], check=False, timeout=60)
    assert p.returncode != 0 and "--output_dir is required with --merge_lora false" in p.stderr, p.stderr
    p = run(["export", "--output_dir", tmp_path / "x"], check=False, timeout=60)
    assert p.returncode != 0 and "--checkpoint (or ms-swift's --adapters) is required" in p.stderr, p.stderr
    p = run(["export", "--model", "Qwen/Qwen2.5-0.5B", "--adapters", ck, "--quant_bits", "4"], check=False, timeout=60)
    assert p.returncode != 0, p.stderr
    assert ("unknown option '--model' (ms-swift's; not in omnishard): the checkpoint (--checkpoint, or --adapters) "
            "holds its base model: leave --model out") in p.stderr, p.stderr
    assert "unknown option '--quant_bits' (ms-swift's; not in omnishard): no quantized export" in p.stderr, p.stderr
    p = run(["export", "--adapters", ck, "--output_dir", tmp_path / "noted", "--safe_serialization", "true"], timeout=120)
    assert p.stderr.count("omnishard export: --safe_serialization accepted, no effect here: the model is always "
                          "written as safetensors") == 1, p.stderr
