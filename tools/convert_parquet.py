"""omnishard convert: SLAM-Omni Parquet shards (the Hugging Face datasets VoiceAssistant-400K-SLAM-Omni,
UltraChat-300K-SLAM-Omni, Belle_1.4M-SLAM-Omni, ...) -> audio files + SLAM-Omni JSON Lines records for
`omnishard sft --dataset` (docs/dataset.md, "Converting the public Parquet datasets").

Usage: omnishard convert --output_dir DIR [options] SHARD.parquet|DIR [...]   (--help for the options)

Rows are read one batch at a time (pyarrow `iter_batches`: one row group in memory at a time), each question's
audio is decoded and written as DIR/audio/<shard>/<row>.wav (or .flac), its record appended to DIR/train.jsonl.
Progress is committed every --batch_rows rows to DIR/convert_state.json (written to a temporary file, synced and
renamed); a run that was stopped (killed, an error) is resumed by running the same command again: the JSON Lines
file is cut back to the last commit and the rows after it are written again, so the result equals an
uninterrupted run.

Columns (the SLAM-Omni datasets' schema; see docs/dataset.md):
  question_audio                 struct {array: list<float>, sampling_rate: int, path: string} (SLAM-Omni), or
                                 {bytes: binary, path: string} (HF `Audio` feature: an encoded file), or a string
                                 path; null: a text question
  question                       string -> source_text
  answer                         string -> target_text
  answer_cosyvoice_speech_token  list<int> -> target_token
  split_name, index, round       kept in the record as they are
"""
import argparse, io, json, os, signal, sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import soundfile as sf
from tqdm import tqdm

STATE_VERSION = 1
AUDIO = "question_audio"
TEXT_COLUMNS = {"question": "source_text", "answer": "target_text"}
TOKENS = "answer_cosyvoice_speech_token"
KEPT = ("split_name", "index", "round")
FORMATS = {"wav": ("WAV", "PCM_16", ".wav"), "flac": ("FLAC", "PCM_16", ".flac"), "float": ("WAV", "FLOAT", ".wav")}


class ConvertError(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(prog="omnishard convert", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="SHARD", help="Parquet files, or folders (their *.parquet, sorted)")
    p.add_argument("--output_dir", required=True, help="where the records and audio go")
    p.add_argument("--jsonl", default="train.jsonl", help="name of the records file in --output_dir")
    p.add_argument("--audio_format", choices=sorted(FORMATS), default="wav",
                   help="wav: 16-bit PCM WAV (default); flac: 16-bit FLAC; float: 32-bit float WAV (arrays exact)")
    p.add_argument("--batch_rows", type=int, default=256, help="rows read and committed at a time (default 256)")
    p.add_argument("--on_error", choices=["stop", "skip"], default="stop",
                   help="a row that cannot be converted: stop (default), or skip it (listed in convert_skipped.jsonl)")
    p.add_argument("--restart", action="store_true", help="forget an earlier run's progress in --output_dir")
    p.add_argument("--no_progress", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    if a.batch_rows < 1:
        p.error(f"--batch_rows: expected a positive number, got {a.batch_rows}")
    if os.sep in a.jsonl or a.jsonl in ("", ".", ".."):
        p.error(f"--jsonl: expected a file name without folders, got '{a.jsonl}'")
    return a


def list_shards(inputs):
    shards = []
    for x in inputs:
        if os.path.isdir(x):
            found = sorted(os.path.join(x, f) for f in os.listdir(x) if f.endswith(".parquet"))
            if not found:
                raise ConvertError(f"{x}: no *.parquet files in this folder")
            shards += found
        elif os.path.isfile(x):
            shards.append(x)
        else:
            raise ConvertError(f"{x}: no such file or folder")
    stems = {}
    for s in shards:
        stem = os.path.splitext(os.path.basename(s))[0]
        if stem in stems:
            raise ConvertError(f"{s}: same name as {stems[stem]} (their audio folders would collide)")
        stems[stem] = s
    return shards


def open_shard(path):
    try:   # buffered reads, no pre-buffering: else pyarrow keeps every row group read so far in memory
        f = pq.ParquetFile(path, buffer_size=1 << 20, pre_buffer=False)
    except (pa.ArrowException, OSError) as e:
        raise ConvertError(f"{path}: not a readable Parquet file: {e}") from None
    check_schema(path, f.schema_arrow)
    return f


def is_int_list(t):
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type)


def check_schema(path, schema):
    names = set(schema.names)
    if "answer" not in names:
        raise ConvertError(f"{path}: no column 'answer' (columns: {', '.join(schema.names)}); "
                           "expected the SLAM-Omni schema (docs/dataset.md)")
    for col in TEXT_COLUMNS:
        if col in names and not (pa.types.is_string(schema.field(col).type)
                                 or pa.types.is_large_string(schema.field(col).type)):
            raise ConvertError(f"{path}: column '{col}': expected strings, got {schema.field(col).type}")
    if TOKENS in names and not is_int_list(schema.field(TOKENS).type):
        raise ConvertError(f"{path}: column '{TOKENS}': expected a list of integers, got {schema.field(TOKENS).type}")
    if AUDIO in names:
        t = schema.field(AUDIO).type
        if pa.types.is_struct(t):
            sub = {t.field(i).name for i in range(t.num_fields)}
            if not ({"array", "sampling_rate"} <= sub or "bytes" in sub or "path" in sub):
                raise ConvertError(f"{path}: column '{AUDIO}': expected a struct with array+sampling_rate, bytes or "
                                   f"path, got {t}")
        elif not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise ConvertError(f"{path}: column '{AUDIO}': expected a struct or a path string, got {t}")


def shard_identity(path, f):
    return {"path": os.path.abspath(path), "bytes": os.path.getsize(path), "rows": f.metadata.num_rows}


# ---- audio -------------------------------------------------------------------------------------------------------

def decode_file(data, where):
    """an encoded audio file (bytes or a path) -> (float32 samples [frames] or [frames, channels], rate)"""
    try:
        x, rate = sf.read(io.BytesIO(data) if isinstance(data, bytes) else data, dtype="float32")
    except (sf.LibsndfileError, RuntimeError, TypeError) as e:
        e = getattr(e, "error_string", e)
        raise ConvertError(f"{where}: cannot decode the audio (libsndfile {sf.__libsndfile_version__}: {e}; "
                           f"readable: {', '.join(sorted(sf.available_formats()))})") from None
    if x.size == 0:
        raise ConvertError(f"{where}: the audio has no samples")
    return x, rate


def question_audio(value, shard, row):
    """the row's question_audio -> (samples, rate) or None (a text question)"""
    where = f"{shard}:row {row}:field '{AUDIO}"
    if value is None:
        return None
    arr, data, path = value.get("array"), value.get("bytes"), value.get("path")
    if arr is not None:
        rate = value.get("sampling_rate")
        if rate is None or not 1000 <= rate <= 768000:
            raise ConvertError(f"{where}.sampling_rate': expected a rate in 1000..768000 Hz, got {rate}")
        x = np.asarray(arr, dtype=np.float32)
        if x.ndim != 1 or x.size == 0:
            raise ConvertError(f"{where}.array': expected a non-empty list of samples, got shape {x.shape}")
        if not np.isfinite(x).all():
            raise ConvertError(f"{where}.array': sample {int(np.argmin(np.isfinite(x)))} is not a finite number")
        return x, int(rate)
    if data is not None:
        return decode_file(bytes(data), where + ".bytes'")
    if path:
        full = path if os.path.isabs(path) else os.path.join(os.path.dirname(os.path.abspath(shard)), path)
        if not os.path.isfile(full):
            raise ConvertError(f"{where}.path': no array or bytes in the row, and no file '{full}'")
        return decode_file(full, where + f".path' ({full})")
    return None


def write_audio(path, x, rate, fmt):
    """write atomically; returns the number of samples clipped to [-1, 1) for 16-bit output"""
    container, subtype, _ = FORMATS[fmt]
    clipped = 0
    if subtype == "PCM_16":   # int16 = round(x * 32768): omnishard reads it back as int16 / 32768
        q = np.rint(x.astype(np.float64) * 32768.0)
        clipped = int(np.count_nonzero((q > 32767) | (q < -32768)))
        x = np.clip(q, -32768, 32767).astype(np.int16)
    tmp = path + ".tmp"
    sf.write(tmp, x, rate, format=container, subtype=subtype)
    os.replace(tmp, path)
    return clipped


# ---- state -------------------------------------------------------------------------------------------------------

def write_json_atomic(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_state(out, identity, options, restart, files):
    path = os.path.join(out, "convert_state.json")
    fresh = {"version": STATE_VERSION, "inputs": identity, "options": options, "shard": 0, "row": 0,
             "jsonl_bytes": 0, "skipped_bytes": 0, "written": 0, "skipped": 0, "clipped_rows": 0, "done": False}
    if restart or not os.path.exists(path):
        if not restart and os.path.exists(files[0]):
            raise ConvertError(f"{files[0]}: exists but {path} does not (not written by omnishard convert?): "
                               "remove it, choose another --output_dir, or pass --restart to overwrite")
        for f in files:
            open(f, "wb").close()
        return fresh
    try:
        with open(path) as f:
            st = json.load(f)
    except (OSError, ValueError) as e:
        raise ConvertError(f"{path}: unreadable ({e}); pass --restart to start again") from None
    if st.get("version") != STATE_VERSION:
        raise ConvertError(f"{path}: version {st.get('version')}, expected {STATE_VERSION}; pass --restart")
    if st["inputs"] != identity:
        raise ConvertError(f"{path}: an earlier run converted other input files ({[i['path'] for i in st['inputs']]}, "
                           "or they changed size); pass --restart to start again, or use another --output_dir")
    if st["options"] != options:
        raise ConvertError(f"{path}: an earlier run used other options ({st['options']}, now {options}); "
                           "pass --restart to start again, or use another --output_dir")
    for f, n in zip(files, (st["jsonl_bytes"], st["skipped_bytes"])):
        if not os.path.exists(f) or os.path.getsize(f) < n:
            raise ConvertError(f"{f}: shorter than the {n} bytes {path} says were written; pass --restart")
        os.truncate(f, n)   # drop what was written after the last commit
    return st


# ---- conversion --------------------------------------------------------------------------------------------------

def columns(batch):
    """name -> column of a batch; the question_audio struct split into its fields ('question_audio.array', ...)"""
    cols = {name: batch.column(name) for name in batch.schema.names}
    audio = cols.get(AUDIO)
    if audio is not None and pa.types.is_struct(audio.type):
        for fld, child in zip(audio.type, audio.flatten()):   # flatten: the struct's offset and nulls applied
            cols[f"{AUDIO}.{fld.name}"] = child
    return cols


def audio_value(cols, i):
    """row i's question_audio as a dict (array as a float32 numpy view), or None"""
    col = cols.get(AUDIO)
    if col is None or not col[i].is_valid:
        return None
    if not pa.types.is_struct(col.type):
        return {"path": col[i].as_py()}
    out = {}
    for name in ("array", "bytes", "path", "sampling_rate"):
        c = cols.get(f"{AUDIO}.{name}")
        if c is not None and c[i].is_valid:
            out[name] = c[i].values.to_numpy(zero_copy_only=False) if name == "array" else c[i].as_py()
    return out


def record(cols, i, shard, stem, row, out, fmt, st):
    """the JSON record of row `row` (index i in the batch); writes its audio file"""
    get = lambda name: cols[name][i].as_py() if name in cols else None  # noqa: E731
    rec = {}
    audio = audio_value(cols, i)
    key = audio.get("path") if audio else None
    rec["key"] = key if key else f"{stem}:{row}"
    x = question_audio(audio, shard, row)
    if x is not None:
        rel = os.path.join("audio", stem, f"{row:08d}{FORMATS[fmt][2]}")
        if write_audio(os.path.join(out, rel), x[0], x[1], fmt):
            st["clipped_rows"] += 1
        rec["source_wav"] = rel
    for col, field in TEXT_COLUMNS.items():
        v = get(col)
        if v is not None:
            rec[field] = v
    tokens = get(TOKENS)
    if tokens is not None:
        rec["target_token"] = tokens
    for col in KEPT:
        v = get(col)
        if v is not None:
            rec[col] = v
    return rec


def main(argv):
    a = parse_args(argv)
    shards = list_shards(a.inputs)
    files = [open_shard(s) for s in shards]
    identity = [shard_identity(s, f) for s, f in zip(shards, files)]
    options = {"audio_format": a.audio_format, "jsonl": a.jsonl}
    out = a.output_dir
    os.makedirs(out, exist_ok=True)
    jsonl_path, skipped_path = os.path.join(out, a.jsonl), os.path.join(out, "convert_skipped.jsonl")
    st = load_state(out, identity, options, a.restart, [jsonl_path, skipped_path])
    total = sum(i["rows"] for i in identity)
    if st["done"]:
        print(f"omnishard convert: {jsonl_path} is complete ({st['written']} records); nothing to do", file=sys.stderr)
        return 0
    bar = tqdm(total=total, initial=st["written"] + st["skipped"], unit="row", file=sys.stderr,
               disable=a.no_progress, desc="convert")
    try:
        convert_all(a, shards, files, st, out, jsonl_path, skipped_path, bar)
    finally:
        bar.close()
    msg = f"omnishard convert: {st['written']} records in {jsonl_path}"
    if st["skipped"]:
        msg += f"; {st['skipped']} rows skipped (listed in {skipped_path})"
    if st["clipped_rows"]:
        msg += f"; {st['clipped_rows']} rows had samples outside [-1, 1) clipped for 16-bit output"
    print(msg, file=sys.stderr)
    return 0


def convert_all(a, shards, files, st, out, jsonl_path, skipped_path, bar):
    kill_after = os.environ.get("OMNISHARD_CONVERT_KILL_AFTER_ROWS", "")   # tests: SIGKILL after that many rows
    kill_after = int(kill_after) if kill_after.isdigit() else 0
    state_path = os.path.join(out, "convert_state.json")
    done_here = 0
    with open(jsonl_path, "ab") as jf, open(skipped_path, "ab") as sfile:
        def commit(shard, row, finished=False):
            for f in (jf, sfile):
                f.flush()
                os.fsync(f.fileno())
            st.update(shard=shard, row=row, jsonl_bytes=jf.tell(), skipped_bytes=sfile.tell(), done=finished)
            write_json_atomic(state_path, st)

        for k in range(st["shard"], len(shards)):
            shard, f = shards[k], files[k]
            stem = os.path.splitext(os.path.basename(shard))[0]
            os.makedirs(os.path.join(out, "audio", stem), exist_ok=True)
            start = st["row"] if k == st["shard"] else 0
            # first row group holding `start`
            groups, first = [], 0
            for g in range(f.metadata.num_row_groups):
                n = f.metadata.row_group(g).num_rows
                if first + n > start or groups:
                    groups.append(g)
                if not groups:
                    first += n
            row = first
            for batch in f.iter_batches(batch_size=a.batch_rows, row_groups=groups, use_threads=False):
                cols = columns(batch)
                for i in range(batch.num_rows):
                    if row < start:
                        row += 1
                        continue
                    try:
                        line = json.dumps(record(cols, i, shard, stem, row, out, a.audio_format, st),
                                          ensure_ascii=False)
                        jf.write(line.encode() + b"\n")
                        st["written"] += 1
                    except ConvertError as e:
                        if a.on_error == "stop":
                            commit(k, row)
                            raise
                        sfile.write(json.dumps({"shard": shard, "row": row, "error": str(e)}).encode() + b"\n")
                        st["skipped"] += 1
                    row += 1
                    done_here += 1
                    bar.update(1)
                    if kill_after and done_here == kill_after:
                        jf.flush()
                        os.kill(os.getpid(), signal.SIGKILL)
                commit(k, row)
            commit(k + 1, 0)
        commit(len(shards), 0, finished=True)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ConvertError as e:
        print(f"omnishard: convert: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("omnishard: convert: interrupted; run the same command again to resume", file=sys.stderr)
        sys.exit(130)
