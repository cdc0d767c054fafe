"""Bad input ends with a clear message (file, field, line) and a non-zero exit on every rank, never a crash."""
import json, os, shutil
import pytest
from safetensors.numpy import load_file, save_file

from omni_run import run, tiny_slam


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return tiny_slam(tmp_path_factory, "good", 3)


def sft_fails(model, data, out, np_=None, extra=()):
    p = run(["sft", "--model", model, "--dataset", data, "--output_dir", out, "--max_steps", 1, *extra],
            np_=np_, check=False, timeout=120)
    assert p.returncode > 0, p.stderr      # an exit code, not a signal
    assert "Segmentation" not in p.stderr and "internal error" not in p.stderr, p.stderr
    return p.stderr


def copy_model(good, tmp_path):
    m = tmp_path / "m"
    shutil.copytree(good / "model", m)
    return m


@pytest.mark.parametrize("np_", [None, 2])
def test_missing_model_dir(good, tmp_path, np_):
    err = sft_fails(tmp_path / "nope", good / "data.jsonl", tmp_path / "o", np_)
    assert "nope/config.json" in err


def test_missing_weights_file(good, tmp_path):
    m = copy_model(good, tmp_path)
    os.remove(m / "model.safetensors")
    err = sft_fails(m, good / "data.jsonl", tmp_path / "o")
    assert "model.safetensors" in err


@pytest.mark.parametrize("np_", [None, 2])
def test_corrupt_safetensors(good, tmp_path, np_):
    m = copy_model(good, tmp_path)
    b = (m / "model.safetensors").read_bytes()
    (m / "model.safetensors").write_bytes(b[: len(b) // 2])
    err = sft_fails(m, good / "data.jsonl", tmp_path / "o", np_)
    assert "model.safetensors" in err
    assert not (tmp_path / "o" / "final_model").exists()


def test_wrong_shape(good, tmp_path):
    m = copy_model(good, tmp_path)
    w = load_file(str(m / "model.safetensors"))
    w["model.layers.0.mlp.up_proj.weight"] = w["model.layers.0.mlp.up_proj.weight"][:-1].copy()
    save_file(w, str(m / "model.safetensors"), metadata={"format": "pt"})
    err = sft_fails(m, good / "data.jsonl", tmp_path / "o")
    assert "model.layers.0.mlp.up_proj.weight" in err and "[31, 16]" in err and "[32, 16]" in err


def test_missing_tensor(good, tmp_path):
    m = copy_model(good, tmp_path)
    w = load_file(str(m / "model.safetensors"))
    del w["model.norm.weight"]
    save_file(w, str(m / "model.safetensors"), metadata={"format": "pt"})
    err = sft_fails(m, good / "data.jsonl", tmp_path / "o")
    assert "model.norm.weight" in err and "missing" in err


def test_bad_config_field(good, tmp_path):
    m = copy_model(good, tmp_path)
    c = json.load(open(m / "config.json"))
    c["hidden_size"] = "big"
    json.dump(c, open(m / "config.json", "w"))
    err = sft_fails(m, good / "data.jsonl", tmp_path / "o")
    assert "config.json" in err and "hidden_size" in err


@pytest.mark.parametrize("line,needle", [
    ("{not json", "not a JSON object"),
    ('{"input_ids": [[1,2],[1,2],[1,2]], "labels": [[1,2],[1,2],[1,2]]}', "expected an array of 4 rows"),
    ('{"input_ids": [[1,2],[1,2],[1,2],[1,2]], "labels": [[1,2],[1,2],[1,2],[1]]}', "row 3 has 1 ids"),
    ('{"input_ids": [[1,2],[1,2],[1,2],[1,"x"]], "labels": [[1,2],[1,2],[1,2],[1,2]]}', "expected an integer"),
])
@pytest.mark.parametrize("np_", [None, 2])
def test_malformed_jsonl_line(good, tmp_path, line, needle, np_):
    data = tmp_path / "d.jsonl"
    data.write_text(open(good / "data.jsonl").readline() + "\n" + line + "\n")
    err = sft_fails(good / "model", data, tmp_path / "o", np_)
    assert f"d.jsonl:3" in err and needle in err, err


def test_id_out_of_vocabulary(good, tmp_path):
    data = tmp_path / "d.jsonl"
    o = json.loads(open(good / "data.jsonl").readline())
    o["input_ids"][3][0] = 10 ** 6
    data.write_text(json.dumps(o) + "\n")
    err = sft_fails(good / "model", data, tmp_path / "o")
    assert "outside the vocabulary" in err and "d.jsonl" in err


def test_unknown_flag_and_bad_values(good, tmp_path):
    err = sft_fails(good / "model", good / "data.jsonl", tmp_path / "o", extra=["--learning_rat", "1"])
    assert "unknown option '--learning_rat'" in err
    err = sft_fails(good / "model", good / "data.jsonl", tmp_path / "o", extra=["--deepspeed", "zero4"], np_=2)
    assert "--deepspeed" in err
