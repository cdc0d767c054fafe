# src/io against the oracle: files made by Python's safetensors / transformers are read by test_st_tool and the
# sums compared with torch; files written by the C writer are read back by safetensors.safe_open; corrupt files
# must give a clear message (file + field) and a plain non-zero exit, never a signal.
import json, math, os, pathlib, struct, subprocess

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOL = ROOT / os.environ.get("OMNISHARD_BUILD", "build") / "tests" / "test_st_tool"


def run(*args):
    r = subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{args}: rc {r.returncode}: {r.stderr}"
    return r.stdout


def fails(*args, expect=()):
    r = subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=60)
    # > 0: the tool reported an error and exited; < 0 would be a signal (crash)
    assert r.returncode > 0, f"{args}: rc {r.returncode} (expected an error exit)\n{r.stderr}"
    for s in expect:
        assert s in r.stderr, f"{s!r} not in message: {r.stderr}"
    return r.stderr


def parse_dump(out):
    rows = {}
    for line in out.splitlines():
        name, dtype, shape, s, sq = line.split("\t")
        dims = [int(x) for x in shape.strip("[]").split(",") if x]
        rows[name] = (dtype, dims, float(s), float(sq))
    return rows


def close(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


DTYPE_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
               torch.int32: "I32", torch.int64: "I64", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def check_against(rows, tensors):
    assert set(rows) == set(tensors)
    for name, t in tensors.items():
        dtype, dims, s, sq = rows[name]
        assert dtype == DTYPE_NAMES[t.dtype], name
        assert dims == list(t.shape), name
        # the reader converts floats to fp32 first; integers are exact
        ref = t.to(torch.float32).double() if t.dtype.is_floating_point else t.to(torch.int64).double()
        assert close(s, ref.sum().item()), (name, s, ref.sum().item())
        assert close(sq, (ref * ref).sum().item()), (name, sq, (ref * ref).sum().item())


F16_SPECIAL = [0.0, -0.0, 1.0, -2.5, 65504.0, -65504.0, float("inf"), float("-inf"), float("nan"),
               2.0 ** -24, 3 * 2.0 ** -24, -(2.0 ** -14 - 2.0 ** -24), 2.0 ** -14, 1e-5, -3e-6, 0.1]


def dtype_tensors():
    g = torch.Generator().manual_seed(1)
    return {
        "f32.w": torch.randn(3, 5, generator=g),
        "f16.big": torch.randn(3000, generator=g).to(torch.float16),   # several read chunks
        "f16.special": torch.tensor(F16_SPECIAL, dtype=torch.float16),
        "bf16.w": (torch.randn(4, 4, 2, generator=g) * 100).to(torch.bfloat16),
        "bf16.special": torch.tensor([float("inf"), float("-inf"), 1e-40, -3.0], dtype=torch.bfloat16),
        "f64.v": torch.randn(10, generator=g, dtype=torch.float64) * 1e3,
        "i64": torch.arange(-5, 20, dtype=torch.int64) * 1000003,
        "i32": torch.arange(-7, 7, dtype=torch.int32),
        "i8": torch.tensor([-128, -1, 0, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 1, 200, 255], dtype=torch.uint8),
        "mask": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 3),
        "x" * 200 + ".long.name": torch.ones(2, 1, 1, 1, 1, 1, 1, 2),   # 8 dims
    }


def test_usage_without_arguments():
    r = subprocess.run([str(TOOL)], capture_output=True, text=True)
    assert r.returncode == 0 and "usage" in r.stdout


def test_dump_all_dtypes(tmp_path):
    ts = dtype_tensors()
    f = tmp_path / "t.safetensors"
    save_file(ts, str(f), metadata={"format": "pt", "note": "hello \"world\""})
    check_against(parse_dump(run("dump", f)), ts)
    assert run("meta", f, "format").strip() == "pt"
    assert run("meta", f, "note").strip() == 'hello "world"'
    assert run("meta", f, "absent").strip() == "(none)"


@pytest.mark.parametrize("name", ["f16.special", "bf16.special", "f16.big", "f64.v"])
def test_float_conversion_exact(tmp_path, name):
    ts = dtype_tensors()
    f = tmp_path / "t.safetensors"
    save_file(ts, str(f))
    got = np.array([float(x) for x in run("values", f, name).split()], dtype=np.float32)
    ref = ts[name].to(torch.float32).numpy()
    # bit-exact, including signed zero, inf, nan and fp16 subnormals
    assert np.array_equal(got.view(np.uint32)[~np.isnan(got)], ref.view(np.uint32)[~np.isnan(ref)])
    assert np.array_equal(np.isnan(got), np.isnan(ref))


def test_non_float_read_is_an_error(tmp_path):
    f = tmp_path / "t.safetensors"
    save_file({"ids": torch.arange(4)}, str(f))
    fails("values", f, "ids", expect=["'ids'", "I64", "cannot be read as float"])


@pytest.fixture(scope="module")
def tiny_qwen2(tmp_path_factory):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    cfg = Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=128, tie_word_embeddings=False, rms_norm_eps=1e-5,
                      max_position_embeddings=512, bos_token_id=1, eos_token_id=2)
    m = Qwen2ForCausalLM(cfg)
    sharded = tmp_path_factory.mktemp("sharded")
    single = tmp_path_factory.mktemp("single")
    m.save_pretrained(str(sharded), max_shard_size="20KB")
    m.save_pretrained(str(single))
    return m, sharded, single


def read_all(files):
    out = {}
    for f in files:
        with safe_open(str(f), "pt") as h:
            for k in h.keys():
                out[k] = h.get_tensor(k)
    return out


def test_sharded_model_dir(tiny_qwen2):
    m, d, _ = tiny_qwen2
    index = json.loads((d / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 2
    ref = read_all(d / s for s in shards)
    rows = parse_dump(run("dump", d))
    check_against(rows, ref)
    assert set(rows) == set(index["weight_map"]) == set(m.state_dict())


def test_single_file_dir_and_extra_file(tiny_qwen2, tmp_path):
    m, _, d = tiny_qwen2
    assert not (d / "model.safetensors.index.json").exists()
    extra = {"group_decode_adapter.linear.weight": torch.randn(6, 4), "group_decode_adapter.linear.bias": torch.randn(6)}
    save_file(extra, str(tmp_path / "omni.safetensors"))
    ref = read_all([d / "model.safetensors"])
    ref.update(extra)
    check_against(parse_dump(run("dump", d, tmp_path / "omni.safetensors")), ref)
    # a later file may not redefine a tensor
    save_file({"lm_head.weight": torch.zeros(2)}, str(tmp_path / "dup.safetensors"))
    fails("dump", d, tmp_path / "dup.safetensors",
          expect=["dup.safetensors", "'lm_head.weight'", "already defined by", "model.safetensors"])


def copy_dir(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_dir_errors(tiny_qwen2, tmp_path):
    _, sharded, _ = tiny_qwen2
    empty = tmp_path / "empty"
    empty.mkdir()
    fails("dump", empty, expect=[str(empty), "model.safetensors", "model.safetensors.index.json"])
    fails("dump", tmp_path / "nowhere", expect=[str(tmp_path / "nowhere")])

    d = copy_dir(sharded, tmp_path / "missing_shard")
    idx = json.loads((d / "model.safetensors.index.json").read_text())
    victim = sorted(set(idx["weight_map"].values()))[1]
    (d / victim).unlink()
    fails("dump", d, expect=["model.safetensors.index.json", victim, "No such file"])

    d = copy_dir(sharded, tmp_path / "missing_tensor")
    idx = json.loads((d / "model.safetensors.index.json").read_text())
    idx["weight_map"]["model.layers.9.mlp.up_proj.weight"] = victim
    (d / "model.safetensors.index.json").write_text(json.dumps(idx))
    fails("dump", d, expect=["model.safetensors.index.json", "'model.layers.9.mlp.up_proj.weight'", victim])

    d = copy_dir(sharded, tmp_path / "wrong_shard")
    idx = json.loads((d / "model.safetensors.index.json").read_text())
    name, shard = next(iter(idx["weight_map"].items()))
    other = next(s for s in sorted(set(idx["weight_map"].values())) if s != shard)
    idx["weight_map"][name] = other
    (d / "model.safetensors.index.json").write_text(json.dumps(idx))
    fails("dump", d, expect=["weight_map", f"'{name}'", other])

    d = copy_dir(sharded, tmp_path / "escape")
    idx = json.loads((d / "model.safetensors.index.json").read_text())
    idx["weight_map"][name] = "../" + shard
    (d / "model.safetensors.index.json").write_text(json.dumps(idx))
    fails("dump", d, expect=["weight_map", f"'{name}'"])

    d = copy_dir(sharded, tmp_path / "badindex")
    (d / "model.safetensors.index.json").write_text('{"weight_map": [1, 2]}')
    fails("dump", d, expect=["model.safetensors.index.json", "weight_map"])


# ---- writer ----

W_NAMES = ["model.embed_tokens.weight", 'a "quoted" \\ name \u00e9', "scalar", "empty", "layers.0.w"]
W_SHAPES = [[7, 3], [2, 3, 4], [], [0, 5], [13]]


def writer_expected():
    total = sum(int(np.prod(s)) for s in W_SHAPES)
    i = np.arange(total, dtype=np.float64)
    flat = ((i % 97) * 0.25 - 7 + i / 1024).astype(np.float32)
    out, at = {}, 0
    for n, s in zip(W_NAMES, W_SHAPES):
        k = int(np.prod(s))
        out[n] = flat[at:at + k].reshape(s)
        at += k
    return out


def test_writer_read_back_by_safetensors(tmp_path):
    out = tmp_path / "w.safetensors"
    run("write", out)
    assert sorted(os.listdir(tmp_path)) == ["w.safetensors"]   # no temp file left behind
    raw = out.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    assert n % 8 == 0
    header = json.loads(raw[8:8 + n])
    assert header["__metadata__"] == {"format": "pt", "note": 'tab\there "q"'}
    assert [k for k in header if k != "__metadata__"] == W_NAMES   # in the given order
    exp = writer_expected()
    with safe_open(str(out), "np") as h:
        assert set(h.keys()) == set(W_NAMES)
        assert h.metadata() == {"format": "pt", "note": 'tab\there "q"'}
        for name in W_NAMES:
            got = h.get_tensor(name)
            assert got.dtype == np.float32 and list(got.shape) == list(exp[name].shape), name
            assert np.array_equal(got, exp[name]), name
    # and our own reader agrees with the same expectation
    rows = parse_dump(run("dump", out))
    for name in W_NAMES:
        e = exp[name].astype(np.float64)
        assert close(rows[name][2], e.sum()) and close(rows[name][3], (e * e).sum()), name


@pytest.mark.parametrize("mode", ["write-short", "write-over"])
def test_writer_count_mismatch_leaves_nothing(tmp_path, mode):
    out = tmp_path / "w.safetensors"
    fails(mode, out, expect=[str(out), "floats"])
    assert os.listdir(tmp_path) == []


def test_writer_replaces_atomically(tmp_path):
    out = tmp_path / "w.safetensors"
    out.write_bytes(b"old contents")
    run("write", out)
    with safe_open(str(out), "np") as h:
        assert set(h.keys()) == set(W_NAMES)


# ---- corrupt files ----

def raw_file(path, header, data=b"", hlen=None):
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h) if hlen is None else hlen) + h + data)
    return path


def good_header():
    return {"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
            "b": {"dtype": "F16", "shape": [4], "data_offsets": [16, 24]}}


def mutated(changes):
    h = good_header()
    for (name, field), value in changes.items():
        h[name][field] = value
    return h


CORRUPT = {
    # id: (header, data, hlen, expected message parts)
    "short_file": (None, None, None, ["file is 5 bytes", "too short"]),
    "hlen_beyond_file": (good_header(), bytes(24), 10 ** 6, ["header length 1000000", "exceeds the file"]),
    "hlen_over_limit": (good_header(), bytes(24), 2 ** 40, ["header length", "exceeds the limit"]),
    "not_json": (b'{"a": {"dtype": "F32", ', bytes(24), None, ["header", "not valid JSON"]),
    "not_object": (b"[1, 2, 3]", b"", None, ["header", "expected a JSON object"]),
    "trailing_bytes": (json.dumps(good_header()).encode() + b"  xyz", bytes(24), None, ["header", "after the JSON"]),
    "offsets_past_end": (mutated({("b", "data_offsets"): [16, 32], ("b", "shape"): [8]}), bytes(24), None,
                         ["tensor 'b'", "data_offsets [16, 32]", "exceed the data section of 24 bytes"]),
    "overlap": ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                 "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, bytes(24), None,
                ["tensor 'b'", "data_offsets [8, 24]", "overlap", "'a'"]),
    "byte_count": (mutated({("a", "shape"): [3]}), bytes(24), None,
                   ["tensor 'a'", "data_offsets [0, 16]", "16 bytes", "need 12 bytes"]),
    "begin_after_end": (mutated({("b", "data_offsets"): [24, 16]}), bytes(24), None,
                        ["tensor 'b'", "data_offsets [24, 16]", "begin is after end"]),
    "offsets_not_pair": (mutated({("b", "data_offsets"): [16]}), bytes(24), None, ["tensor 'b'", "data_offsets"]),
    "offset_negative": (mutated({("b", "data_offsets"): [-8, 24]}), bytes(24), None, ["tensor 'b'", "data_offsets"]),
    "unknown_dtype": (mutated({("b", "dtype"): "F8_E4M3"}), bytes(24), None,
                      ["tensor 'b'", "dtype", "F8_E4M3", "not supported"]),
    "dtype_not_string": (mutated({("b", "dtype"): 5}), bytes(24), None, ["tensor 'b'", "dtype", "expected a string"]),
    "negative_shape": (mutated({("a", "shape"): [-1, 2]}), bytes(24), None,
                       ["tensor 'a'", "shape[0]", "non-negative integer", "got -1"]),
    "fractional_shape": (mutated({("a", "shape"): [2, 2.5]}), bytes(24), None, ["tensor 'a'", "shape[1]", "2.5"]),
    "shape_not_array": (mutated({("a", "shape"): "2x2"}), bytes(24), None, ["tensor 'a'", "shape", "2x2"]),
    "too_many_dims": (mutated({("a", "shape"): [1] * 9}), bytes(24), None, ["tensor 'a'", "shape", "9 dimensions"]),
    "shape_overflow": (mutated({("a", "shape"): [2 ** 40, 2 ** 40]}), bytes(24), None,
                       ["tensor 'a'", "shape", "overflows"]),
    "missing_offsets": ({"a": {"dtype": "F32", "shape": [4]}}, bytes(16), None, ["tensor 'a'", "data_offsets"]),
    "entry_not_object": ({"a": [1, 2]}, b"", None, ["tensor 'a'", "expected an object"]),
    "duplicate_name": (b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
                       b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', bytes(8), None,
                       ["tensor 'a'", "appears twice"]),
    "metadata_not_string": ({"__metadata__": {"k": 1}, **good_header()}, bytes(24), None,
                            ["__metadata__", "'k'", "expected a string"]),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_file(tmp_path, case):
    header, data, hlen, expect = CORRUPT[case]
    f = tmp_path / f"{case}.safetensors"
    if header is None:
        f.write_bytes(b"\x10\x00\x00\x00\x00")
    else:
        raw_file(f, header, data, hlen)
    fails("dump", f, expect=[str(f), *expect])


def test_truncated_real_file(tmp_path):
    f = tmp_path / "t.safetensors"
    save_file({"z.last": torch.ones(100), "a.first": torch.ones(10)}, str(f))
    raw = f.read_bytes()
    f.write_bytes(raw[:-10])
    fails("dump", f, expect=[str(f), "data_offsets", "exceed the data section"])
    f.write_bytes(raw[:20])   # cut inside the header
    fails("dump", f, expect=[str(f), "header length", "exceeds the file"])


def test_corrupt_shard_in_dir(tiny_qwen2, tmp_path):
    _, sharded, _ = tiny_qwen2
    d = copy_dir(sharded, tmp_path / "d")
    shard = sorted(p.name for p in d.glob("*.safetensors"))[2]
    raw = (d / shard).read_bytes()
    (d / shard).write_bytes(raw[:-4])
    fails("dump", d, expect=[shard, "data_offsets", "exceed the data section"])


# ---- config.json ----

def qwen2_fields(c):
    rp = c.rope_parameters or {}
    return {"model_type": c.model_type, "hidden_size": c.hidden_size, "intermediate_size": c.intermediate_size,
            "num_hidden_layers": c.num_hidden_layers, "num_attention_heads": c.num_attention_heads,
            "num_key_value_heads": c.num_key_value_heads,
            "head_dim": getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
            "vocab_size": c.vocab_size, "max_position_embeddings": c.max_position_embeddings,
            "tie_word_embeddings": int(c.tie_word_embeddings), "rms_norm_eps": c.rms_norm_eps,
            "rope_theta": rp.get("rope_theta", getattr(c, "rope_theta", None))}


def parse_config(out):
    vals = dict(line.split(" ", 1) for line in out.splitlines())
    return {k: (v if k in ("model_type", "torch_dtype") else float(v) if "." in v or "e" in v else int(v))
            for k, v in vals.items()}


def assert_config_matches(out, c):
    got = parse_config(out)
    for k, v in qwen2_fields(c).items():
        assert got[k] == v, (k, got[k], v)


def test_config_from_transformers(tmp_path):
    from transformers import Qwen2Config
    c = Qwen2Config(hidden_size=48, intermediate_size=96, num_hidden_layers=3, num_attention_heads=6,
                    num_key_value_heads=2, vocab_size=300, rms_norm_eps=1e-5, tie_word_embeddings=True,
                    max_position_embeddings=1024, rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    c.save_pretrained(str(tmp_path))
    assert_config_matches(run("config", tmp_path / "config.json"), c)


# the shape of a real (transformers 4.x era) Qwen2.5 config.json, read by transformers as the oracle
QWEN25_STYLE = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643,
    "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
    "max_position_embeddings": 32768, "max_window_layers": 21, "model_type": "qwen2", "num_attention_heads": 4,
    "num_hidden_layers": 2, "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}


def write_config(d, obj):
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(obj))
    return d / "config.json"


def test_config_qwen25_style(tmp_path):
    from transformers import Qwen2Config
    f = write_config(tmp_path, QWEN25_STYLE)
    out = run("config", f)
    assert_config_matches(out, Qwen2Config.from_pretrained(str(tmp_path)))
    got = parse_config(out)
    assert got["torch_dtype"] == "bfloat16" and got["bos_token_id"] == 151643 and got["eos_token_id"] == 151643


def test_config_defaults(tmp_path):
    from transformers import Qwen2Config
    minimal = {k: QWEN25_STYLE[k] for k in ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                                            "num_attention_heads", "vocab_size")}
    minimal["num_key_value_heads"] = None   # transformers: None -> num_attention_heads
    f = write_config(tmp_path, minimal)
    out = run("config", f)
    assert_config_matches(out, Qwen2Config.from_pretrained(str(tmp_path)))
    got = parse_config(out)
    assert got["num_key_value_heads"] == 4 and got["head_dim"] == 16 and got["rope_theta"] == 10000
    assert got["rms_norm_eps"] == 1e-6 and got["tie_word_embeddings"] == 0 and got["max_position_embeddings"] == 32768
    # an explicit head_dim is kept even when hidden_size is not a multiple of the heads
    f = write_config(tmp_path / "hd", {**minimal, "hidden_size": 50, "head_dim": 16, "num_key_value_heads": 2})
    assert parse_config(run("config", f))["head_dim"] == 16


CONFIG_ERRORS = {
    "missing": ({"hidden_size": None}, ["field 'hidden_size': missing"]),
    "wrong_type": ({"hidden_size": "abc"}, ["field 'hidden_size'", 'expected a positive integer, got "abc"']),
    "fraction": ({"num_hidden_layers": 2.5}, ["field 'num_hidden_layers'", "got 2.5"]),
    "zero": ({"vocab_size": 0}, ["field 'vocab_size'", "positive integer"]),
    "rope_scaling": ({"rope_scaling": {"type": "yarn", "factor": 4.0}}, ["field 'rope_scaling'", "not supported"]),
    "rope_parameters": ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}},
                        ["field 'rope_parameters'", "not supported"]),
    "sliding": ({"use_sliding_window": True}, ["field 'use_sliding_window'", "not supported"]),
    "layer_types": ({"layer_types": ["full_attention", "sliding_attention"]}, ["field 'layer_types'", "supported"]),
    "dropout": ({"attention_dropout": 0.1}, ["field 'attention_dropout'", "not supported"]),
    "act": ({"hidden_act": "gelu"}, ["field 'hidden_act'", '"gelu" is not supported']),
    "model_type": ({"model_type": "llama"}, ["field 'model_type'", "llama"]),
    "kv_heads": ({"num_key_value_heads": 3}, ["field 'num_key_value_heads'", "does not divide"]),
    "head_split": ({"hidden_size": 66}, ["field 'hidden_size'", "not a multiple"]),
    "eps": ({"rms_norm_eps": "small"}, ["field 'rms_norm_eps'", "positive number"]),
    "tie": ({"tie_word_embeddings": "yes"}, ["field 'tie_word_embeddings'", "true or false"]),
}


@pytest.mark.parametrize("case", sorted(CONFIG_ERRORS))
def test_config_errors(tmp_path, case):
    change, expect = CONFIG_ERRORS[case]
    obj = dict(QWEN25_STYLE)
    for k, v in change.items():
        if v is None:
            del obj[k]
        else:
            obj[k] = v
    f = write_config(tmp_path, obj)
    fails("config", f, expect=[str(f), *expect])


def test_config_file_errors(tmp_path):
    fails("config", tmp_path / "nope.json", expect=[str(tmp_path / "nope.json"), "No such file"])
    (tmp_path / "bad.json").write_text('{"hidden_size": 4,')
    fails("config", tmp_path / "bad.json", expect=[str(tmp_path / "bad.json"), "not valid JSON"])


def test_config_write_and_rewrite_load_in_transformers(tiny_qwen2, tmp_path):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    m, _, single = tiny_qwen2
    for mode in ("config-write", "config-rewrite"):
        d = tmp_path / mode
        d.mkdir()
        (d / "model.safetensors").write_bytes((single / "model.safetensors").read_bytes())
        run(mode, single / "config.json", d / "config.json", 0)
        assert not [p for p in os.listdir(d) if ".tmp." in p]
        written = json.loads((d / "config.json").read_text())
        assert written["architectures"] == ["Qwen2ForCausalLM"] and written["model_type"] == "qwen2"
        assert written["torch_dtype"] == "float32" and written["use_cache"] is True
        m2 = Qwen2ForCausalLM.from_pretrained(str(d))
        assert_config_matches(run("config", d / "config.json"), m.config)
        assert qwen2_fields(m2.config) == qwen2_fields(m.config)
        assert m2.config.bos_token_id == 1 and m2.config.eos_token_id == 2
        ids = torch.tensor([[3, 17, 99, 5]])
        with torch.no_grad():
            assert torch.equal(m(ids).logits, m2(ids).logits)
        # vocabulary override (as after adding the audio rows)
        run(mode, single / "config.json", d / "config.json", 4160 + 128)
        c = Qwen2Config.from_pretrained(str(d))
        assert c.vocab_size == 4288 and c.hidden_size == 32
    # rewrite keeps fields it does not know
    src = json.loads((single / "config.json").read_text())
    kept = json.loads((tmp_path / "config-rewrite" / "config.json").read_text())
    for k in ("initializer_range", "max_window_layers", "layer_types", "transformers_version"):
        assert kept[k] == src[k], k


def test_whisper_config(tmp_path):
    from transformers import WhisperConfig
    c = WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=256, num_mel_bins=80,
                      max_source_positions=1500)
    c.save_pretrained(str(tmp_path))
    got = parse_config(run("whisper", tmp_path / "config.json"))
    for k in ("d_model", "encoder_layers", "encoder_attention_heads", "encoder_ffn_dim", "num_mel_bins",
              "max_source_positions"):
        assert got[k] == getattr(c, k), k
    obj = json.loads((tmp_path / "config.json").read_text())
    bad = tmp_path / "bad"
    f = write_config(bad, {**obj, "activation_function": "relu"})
    fails("whisper", f, expect=[str(f), "field 'activation_function'", "not supported"])
    f = write_config(bad, {k: v for k, v in obj.items() if k != "d_model"})
    fails("whisper", f, expect=[str(f), "field 'd_model': missing"])
    f = write_config(bad, {**obj, "encoder_layers": "12"})
    fails("whisper", f, expect=[str(f), "field 'encoder_layers'", 'got "12"'])


# ---- atomic.h ----

def test_atomic_helpers(tmp_path):
    out = run("atomic", tmp_path)
    assert f"{tmp_path}/a/b/c/missing.txt" in out and "No such file" in out
    assert (tmp_path / "final" / "sub" / "round.txt").read_text() == "round 2\n"
    assert sorted(os.listdir(tmp_path)) == ["final"]   # tmp dirs renamed, old final and a/ removed
