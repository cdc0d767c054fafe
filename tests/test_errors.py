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
    ('{"input_ids": [[1,2],[1,2],[1,2],[1,2]], "labels": [[1,2],[1,2],[1,2],[1,2]], "source_wav": "a\0b"}',
     "malformed JSON: a NUL byte"),
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


# issue 24: numbers are decimal (no hex, inf, nan, blanks), within what their consumer can represent; a loss that
# trains nothing is an error. Each refused at parse time, before anything is read or written.
@pytest.mark.parametrize("extra,needle", [
    (["--learning_rate", "0x10"], "--learning_rate: expected a decimal number, got '0x10'"),
    (["--learning_rate", "1e39"], "--learning_rate: expected a value in [0,3.4e38], got '1e39'"),
    (["--adam_beta1", "nan"], "--adam_beta1: expected a decimal number, got 'nan'"),
    (["--warmup_ratio", " 0.1"], "--warmup_ratio: expected a decimal number, got ' 0.1'"),
    (["--max_steps", "0x10"], "--max_steps: expected a decimal integer, got '0x10'"),
    (["--ddp_timeout", "1e19"], "--ddp_timeout: expected a value in [0,31536000], got '1e19'"),
    (["--ddp_timeout", "31536001"], "--ddp_timeout: expected a value in [0,31536000], got '31536001'"),
    (["--num_train_epochs", "1e300"], "--num_train_epochs: expected a value in (0,1e9], got '1e300'"),
    (["--gradient_accumulation_steps", "4611686018427387904"],
     "--gradient_accumulation_steps: expected a value in [1,2147483647], got '4611686018427387904'"),
    (["--lora_alpha", "1e39"], "--lora_alpha: expected a value in (0,3.4e38], got '1e39'"),
    (["--loss_weights", "0,0,0,0"], "--loss_weights: every weight is 0 in '0,0,0,0'"),
    (["--loss_weights", "1,0x1,1,1"], "--loss_weights: expected comma-separated decimal numbers in [0,3.4e38]"),
    (["--loss_weights", "1,1e39,1,1"], "--loss_weights: expected comma-separated decimal numbers in [0,3.4e38]"),
    (["--param_loss", "l2:-1e30:lm_head"], "--param_loss 'l2:-1e30:lm_head': the l2 weight must be a decimal number in [0,3.4e38]"),
    (["--param_loss", "l2:nan:lm_head"], "--param_loss 'l2:nan:lm_head': the l2 weight must be a decimal number"),
    (["--param_loss", "l2:inf:lm_head"], "--param_loss 'l2:inf:lm_head': the l2 weight must be a decimal number"),
    (["--param_loss", "l2:1e39:lm_head"], "--param_loss 'l2:1e39:lm_head': the l2 weight must be a decimal number"),
])
def test_numbers_are_decimal_and_within_their_consumers_range(good, tmp_path, extra, needle):
    err = sft_fails(good / "model", good / "data.jsonl", tmp_path / "o", extra=extra)
    assert needle in err, err
    assert not (tmp_path / "o").exists()


def test_a_ddp_timeout_of_a_year_is_accepted(good, tmp_path):
    # the longest deadline still starts (and the guard of MPI_Init/MPI_Finalize neither fires nor spins)
    p = run(["sft", "--model", good / "model", "--dataset", good / "data.jsonl", "--output_dir", tmp_path / "o",
             "--max_steps", 1, "--ddp_timeout", "31536000"], np_=2, check=False, timeout=120)
    assert p.returncode == 0, p.stderr
