"""omnishard convert (src/cli/cmd_convert.c -> tools/convert_parquet.py): SLAM-Omni Parquet shards -> audio files +
JSON Lines records, on Parquet files written here with the public datasets' schema (the dataset cards of
worstchan/*-SLAM-Omni: question_audio {array, path, sampling_rate}, answer_cosyvoice_speech_token, ...; and the HF
`Audio` feature's {bytes, path}). Expected values come from the rows written (pyarrow) and from libsndfile
(soundfile) decoding the embedded files; the output of a killed and resumed run must equal an uninterrupted one
byte for byte; `omnishard sft` trains on the converted records."""
import io, json, os, pathlib, subprocess, sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf
from conftest import BIN, ROOT

from omni_run import logs, run
from oracle import slam_omni_ref as oref
from oracle import slam_samples_ref as ref

AUDIO_ARRAY = pa.struct([("array", pa.list_(pa.float32())), ("path", pa.string()), ("sampling_rate", pa.int64())])
AUDIO_BYTES = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def slam_schema(audio_type):
    return pa.schema([("split_name", pa.string()), ("index", pa.int64()), ("round", pa.int64()),
                      ("question", pa.string()), ("question_audio", audio_type), ("answer", pa.string()),
                      ("answer_cosyvoice_speech_token", pa.list_(pa.int64())), ("answer_snac", pa.string())])


def tone(n, rate, f, amp=0.5):
    return (amp * np.sin(2 * np.pi * f * np.arange(n) / rate)).astype(np.float32)


def encoded(x, rate, fmt, subtype):
    b = io.BytesIO()
    sf.write(b, x, rate, format=fmt, subtype=subtype)
    return b.getvalue()


def array_rows(n, seed=0, vocab=4096, rates=(16000, 22050, 24000), text_row=None):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        rate = rates[i % len(rates)]
        audio = None if i == text_row else {"array": tone(int(rate * (0.2 + 0.05 * i)), rate, 200 + 40 * i).tolist(),
                                            "path": f"q_{seed}_{i}.wav", "sampling_rate": rate}
        rows.append({"split_name": "train", "index": 1000 + i, "round": i % 3,
                     "question": f"<USER>: question number {i}?" if i % 4 else f"USER: hi ASSISTANT: hello <USER>: q{i}",
                     "question_audio": audio, "answer": f"Answer {i} \u4f60\u597d.",
                     "answer_cosyvoice_speech_token": rng.integers(0, vocab, size=5 + i).tolist(),
                     "answer_snac": "#" + " ".join(map(str, range(i)))})
    return rows


def bytes_rows():
    kinds = [("WAV", "PCM_16", 24000), ("FLAC", "PCM_16", 16000), ("OGG", "VORBIS", 22050), ("MP3", "MPEG_LAYER_III", 16000),
             ("WAV", "FLOAT", 8000)]
    rows = []
    for i, (fmt, sub, rate) in enumerate(kinds):
        x = tone(int(rate * 0.3), rate, 300 + 50 * i)
        if i == 1:
            x = np.stack([x, -0.5 * x], axis=1)   # stereo: kept, omnishard averages the channels
        rows.append({"split_name": "train", "index": i, "round": 0, "question": f"<USER>: b{i}",
                     "question_audio": {"bytes": encoded(x, rate, fmt, sub), "path": f"b{i}.{fmt.lower()}"},
                     "answer": f"a{i}", "answer_cosyvoice_speech_token": [i, i + 1, 7], "answer_snac": ""})
    return rows


def write_shard(path, rows, audio_type=AUDIO_ARRAY, row_group_size=3, schema=None):
    table = pa.Table.from_pylist(rows, schema=schema or slam_schema(audio_type))
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def convert(*args, env=None, check=True):
    e = dict(os.environ, **(env or {}))
    r = subprocess.run([str(BIN), "convert", *map(str, args)], capture_output=True, text=True, timeout=300, env=e)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def read_jsonl(path):
    return [json.loads(l) for l in pathlib.Path(path).read_text(encoding="utf-8").splitlines()]


def tree(d):
    """every file under d (but the state file) -> its bytes"""
    d = pathlib.Path(d)
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()
            and p.name != "convert_state.json"}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("shards")
    a = write_shard(d / "train-00000-of-00002.parquet", array_rows(10, seed=1, text_row=4))
    b = write_shard(d / "train-00001-of-00002.parquet", bytes_rows(), audio_type=AUDIO_BYTES, row_group_size=2)
    return d, a, b


def expected_record(row, stem, k, ext=".wav"):
    rec = {"key": row["question_audio"]["path"] if row["question_audio"] else f"{stem}:{k}"}
    if row["question_audio"]:
        rec["source_wav"] = f"audio/{stem}/{k:08d}{ext}"
    rec.update(source_text=row["question"], target_text=row["answer"],
               target_token=row["answer_cosyvoice_speech_token"], split_name=row["split_name"], index=row["index"],
               round=row["round"])
    return rec


def test_converts_the_slam_omni_schema(shards, tmp_path):
    d, a, b = shards
    out = tmp_path / "out"
    r = convert(d, "--output_dir", out, "--batch_rows", 4)
    assert "15 records" in r.stderr, r.stderr
    recs = read_jsonl(out / "train.jsonl")
    rows_a, rows_b = array_rows(10, seed=1, text_row=4), bytes_rows()
    want = [expected_record(r, a.stem, k) for k, r in enumerate(rows_a)] + \
           [expected_record(r, b.stem, k) for k, r in enumerate(rows_b)]
    assert recs == want
    assert "source_wav" not in recs[4]                                  # the null question_audio: a text question
    # arrays: 16-bit PCM at the row's rate, int16 = round(x * 32768)
    for k, row in enumerate(rows_a):
        if row["question_audio"] is None:
            continue
        y, rate = sf.read(out / recs[k]["source_wav"], dtype="int16")
        assert rate == row["question_audio"]["sampling_rate"]
        want16 = np.clip(np.rint(np.asarray(row["question_audio"]["array"], np.float64) * 32768), -32768, 32767)
        np.testing.assert_array_equal(y, want16.astype(np.int16))
    # embedded files: what libsndfile decodes from the bytes, 16-bit
    for k, row in enumerate(rows_b):
        x, rate = sf.read(io.BytesIO(row["question_audio"]["bytes"]), dtype="float64")
        y, rate_out = sf.read(out / recs[10 + k]["source_wav"], dtype="float64")
        assert rate_out == rate and y.shape == x.shape
        np.testing.assert_allclose(y, np.clip(np.rint(x * 32768), -32768, 32767) / 32768, atol=1e-12)


def test_float_and_flac_output(shards, tmp_path):
    d, a, _ = shards
    rows = array_rows(10, seed=1, text_row=4)
    convert(a, "--output_dir", tmp_path / "f", "--audio_format", "float", "--no_progress")
    convert(a, "--output_dir", tmp_path / "c", "--audio_format", "flac", "--no_progress")
    for k in (0, 5):
        x = np.asarray(rows[k]["question_audio"]["array"], np.float32)
        y, _ = sf.read(tmp_path / "f" / "audio" / a.stem / f"{k:08d}.wav", dtype="float32")
        np.testing.assert_array_equal(y, x)                             # float WAV: exact
        y, _ = sf.read(tmp_path / "c" / "audio" / a.stem / f"{k:08d}.flac", dtype="float64")
        np.testing.assert_allclose(y, np.rint(x.astype(np.float64) * 32768) / 32768, atol=1e-12)
    assert read_jsonl(tmp_path / "c" / "train.jsonl")[0]["source_wav"].endswith(".flac")


def test_killed_and_resumed_equals_uninterrupted(shards, tmp_path):
    d, _, _ = shards
    ref_out = tmp_path / "ref"
    convert(d, "--output_dir", ref_out, "--batch_rows", 4, "--no_progress")
    out = tmp_path / "killed"
    runs = 0
    while True:   # every run is killed after 5 rows of its own, i.e. in the middle of a batch of 4
        r = convert(d, "--output_dir", out, "--batch_rows", 4, "--no_progress",
                    env={"OMNISHARD_CONVERT_KILL_AFTER_ROWS": "5"}, check=False)
        runs += 1
        if r.returncode == 0:
            break
        assert r.returncode == -9, r.stderr
        st = json.loads((out / "convert_state.json").read_text())
        assert not st["done"] and runs < 10
    assert runs > 3
    assert tree(out) == tree(ref_out)
    # a complete output: running again does nothing
    r = convert(d, "--output_dir", out, "--no_progress")
    assert "nothing to do" in r.stderr and tree(out) == tree(ref_out)


def test_rerun_with_other_inputs_or_options(shards, tmp_path):
    d, a, b = shards
    out = tmp_path / "o"
    convert(a, "--output_dir", out, "--no_progress")
    r = convert(b, "--output_dir", out, check=False)
    assert r.returncode == 1 and "other input files" in r.stderr and "--restart" in r.stderr
    r = convert(a, "--output_dir", out, "--audio_format", "flac", check=False)
    assert r.returncode == 1 and "other options" in r.stderr
    convert(b, "--output_dir", out, "--restart", "--no_progress")
    assert len(read_jsonl(out / "train.jsonl")) == 5
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "train.jsonl").write_text("{}\n")
    r = convert(a, "--output_dir", tmp_path / "p", check=False)
    assert r.returncode == 1 and "not written by omnishard convert" in r.stderr


def test_errors_name_shard_row_and_field(tmp_path):
    rows = array_rows(4, seed=2)
    rows[2]["question_audio"]["sampling_rate"] = None
    p = write_shard(tmp_path / "bad_rate.parquet", rows)
    r = convert(p, "--output_dir", tmp_path / "o1", "--batch_rows", 2, "--no_progress", check=False)
    assert r.returncode == 1, r.stderr
    assert f"{p}:row 2:field 'question_audio.sampling_rate': expected a rate in 1000..768000 Hz, got None" in r.stderr
    assert len(read_jsonl(tmp_path / "o1" / "train.jsonl")) == 2   # the rows before it are kept; a rerun resumes at it

    rows = bytes_rows()
    rows[1]["question_audio"]["bytes"] = b"this is not audio at all" * 10
    rows[3]["question_audio"]["bytes"] = None
    rows[3]["question_audio"]["path"] = "missing.wav"
    p = write_shard(tmp_path / "bad_bytes.parquet", rows, audio_type=AUDIO_BYTES)
    r = convert(p, "--output_dir", tmp_path / "o2", "--no_progress", check=False)
    assert r.returncode == 1 and f"{p}:row 1:field 'question_audio.bytes': cannot decode the audio" in r.stderr, r.stderr
    r = convert(p, "--output_dir", tmp_path / "o2", "--no_progress", "--on_error", "skip")
    assert "3 records" in r.stderr and "2 rows skipped" in r.stderr, r.stderr
    skipped = read_jsonl(tmp_path / "o2" / "convert_skipped.jsonl")
    assert [s["row"] for s in skipped] == [1, 3]
    assert "field 'question_audio.path': no array or bytes in the row, and no file" in skipped[1]["error"]
    assert [x["index"] for x in read_jsonl(tmp_path / "o2" / "train.jsonl")] == [0, 2, 4]

    rows = array_rows(3, seed=3)
    rows[1]["question_audio"]["array"][5] = float("nan")
    p = write_shard(tmp_path / "nan.parquet", rows)
    r = convert(p, "--output_dir", tmp_path / "o3", check=False)
    assert f"{p}:row 1:field 'question_audio.array': sample 5 is not a finite number" in r.stderr, r.stderr

    p = tmp_path / "no_answer.parquet"
    pq.write_table(pa.table({"question": ["q"]}), p)
    r = convert(p, "--output_dir", tmp_path / "o4", check=False)
    assert r.returncode == 1 and f"{p}: no column 'answer'" in r.stderr
    p = tmp_path / "tokens_as_text.parquet"
    pq.write_table(pa.table({"answer": ["a"], "answer_cosyvoice_speech_token": ["1 2 3"]}), p)
    r = convert(p, "--output_dir", tmp_path / "o5", check=False)
    assert "column 'answer_cosyvoice_speech_token': expected a list of integers, got string" in r.stderr
    (tmp_path / "text.parquet").write_text("not parquet")
    r = convert(tmp_path / "text.parquet", "--output_dir", tmp_path / "o6", check=False)
    assert r.returncode == 1 and "not a readable Parquet file" in r.stderr
    r = convert(tmp_path / "nothing_here.parquet", "--output_dir", tmp_path / "o7", check=False)
    assert r.returncode == 1 and "no such file or folder" in r.stderr


def peak_rss_mb(shard, out):
    """peak RSS of the converter's main() in a fresh interpreter, counted from after the imports (the kernel's
    high-water mark VmHWM is reset by writing 5 to /proc/self/clear_refs)"""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import convert_parquet as c; "
            "open('/proc/self/clear_refs', 'w').write('5'); c.main(sys.argv[2:]); "
            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])")
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "tools"), str(shard), "--output_dir", str(out),
                        "--no_progress", "--batch_rows", "16"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[-1]) / 1024


def audio_shard(path, groups, rows_per_group=8, n=48000, rate=16000):
    """question_audio arrays of n samples, written one row group at a time"""
    base = np.sin(np.arange(n, dtype=np.float32) / 7).astype(np.float32) * 0.1
    schema = pa.schema([("question_audio", AUDIO_ARRAY), ("answer", pa.string())])
    with pq.ParquetWriter(path, schema, compression="none") as w:
        for g in range(groups):
            k = rows_per_group
            samples = pa.ListArray.from_arrays(pa.array(np.arange(k + 1, dtype=np.int32) * n),
                                               pa.array(np.concatenate([np.roll(base, k * g + i) for i in range(k)])))
            audio = pa.StructArray.from_arrays([samples, pa.nulls(k, pa.string()), pa.array([rate] * k, pa.int64())],
                                               fields=list(AUDIO_ARRAY))
            w.write_table(pa.table([audio, pa.array(["a"] * k)], schema=schema))
    return path


def test_streams_row_groups(tmp_path):
    """Row groups of 8 rows of 3 s float32 audio: 30 row groups (46 MB) need no more memory than 5 (8 MB): one
    batch at a time is held, not the file."""
    medium = peak_rss_mb(audio_shard(tmp_path / "medium.parquet", 5), tmp_path / "o_medium")
    big = peak_rss_mb(audio_shard(tmp_path / "big.parquet", 30), tmp_path / "o_big")
    assert len(read_jsonl(tmp_path / "o_big" / "train.jsonl")) == 240
    assert big - medium < 15, (medium, big)


def test_sft_trains_on_converted_records(tmp_path):
    """a tiny SLAM-Omni model with the tiny Whisper encoder of tests/test_speech_train.py trains on the output"""
    T, A, G = 512, 80, 3
    ref.make_model_dir(str(tmp_path / "model"), T=T, A=A, G=G, hidden=32, layers=2, heads=4, kv_heads=2, inter=64)
    oref.add_projector(str(tmp_path / "model"), 16, 24, 32)
    oref.make_encoder(str(tmp_path / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    rows = array_rows(6, seed=5, vocab=A - 64, rates=(16000, 24000))
    write_shard(tmp_path / "data.parquet", rows)
    convert(tmp_path / "data.parquet", "--output_dir", tmp_path / "conv", "--no_progress")
    out = tmp_path / "out"
    p = run(["sft", "--model", tmp_path / "model", "--dataset", tmp_path / "conv" / "train.jsonl", "--output_dir", out,
             "--speech_encoder", tmp_path / "enc", "--learning_rate", "3e-3", "--per_device_train_batch_size", 2,
             "--num_train_epochs", 2, "--max_length", 512, "--logging_steps", 1, "--save_steps", 0, "--seed", 3])
    st = [l for l in logs(out) if "loss" in l]
    assert len(st) == 6, p.stderr
    assert all(np.isfinite(l["loss"]) for l in st)
    assert (out / "final_model" / "model.safetensors").exists()


def test_a_converted_folder_is_a_dataset(tmp_path):
    """--dataset DIR of omnishard convert reads DIR's records file (issue 27): the same samples as the file itself;
    an unfinished conversion and another folder are refused, saying what a dataset folder is"""
    write_shard(tmp_path / "data.parquet", array_rows(4, seed=2, vocab=16, rates=(16000,)))
    convert(tmp_path / "data.parquet", "--output_dir", tmp_path / "conv", "--jsonl", "recs.jsonl", "--no_progress")
    mdir = tmp_path / "m"
    os.makedirs(mdir)
    ref.train_tokenizer(str(mdir / "tokenizer.json"), vocab_size=300)
    (mdir / "slam_omni.json").write_text(json.dumps({"code_layer": 3, "padded_text_vocabsize": 512,
                                                     "padded_audio_vocabsize": 80}))
    tool = ROOT / os.environ.get("OMNISHARD_BUILD", "build") / "tests" / "test_samples_tool"

    def samples(data):
        return subprocess.run([str(tool), str(data), str(mdir), "4096", "right"], capture_output=True, text=True,
                              timeout=60)
    want = samples(tmp_path / "conv" / "recs.jsonl")
    assert want.returncode == 0 and want.stdout.count("\n") == 5, want.stderr
    got = samples(tmp_path / "conv")
    assert got.returncode == 0 and got.stdout == want.stdout, got.stderr
    r = convert(tmp_path / "data.parquet", "--output_dir", tmp_path / "cut", "--batch_rows", 1, "--no_progress",
                env={"OMNISHARD_CONVERT_KILL_AFTER_ROWS": "2"}, check=False)
    assert r.returncode == -9, r.stderr
    p = samples(tmp_path / "cut")
    assert p.returncode == 1 and "omnishard convert has not finished writing" in p.stderr, p.stderr
    p = samples(mdir)
    assert p.returncode == 1 and "a folder that omnishard convert wrote" in p.stderr, p.stderr
