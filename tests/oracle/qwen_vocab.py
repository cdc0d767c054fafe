"""Build the Qwen2.5 tokenizer.json from the real Qwen2 vocabulary, for the tokenizer tests and bench.

The vocabulary (`qwen.tiktoken`: 151,643 lines `base64(token bytes) rank`) ships inside the `dashscope` wheel on
PyPI. We fetch the wheel with `pip download --no-deps` (no dependencies installed), read the file from the zip and
build the tokenizer.json described in docs/spec/qwen2-tokenizer.md:
  - vocab: byte-level string of each token -> its rank;
  - merges: for every multi-byte token, the pair that BPE over the ranks (limited to ranks below the token's)
    ends with; merges are ordered by the merged token's rank, so merge i produces id 256 + i;
  - added tokens 151643..151664 (Qwen2.5), NFC normaliser, Split+ByteLevel pre-tokeniser, ByteLevel decoder.
Everything is cached in $OMNISHARD_CACHE_DIR (default ~/.cache/omnishard). `get_tokenizer_json()` returns the
path of the built file, or None when the wheel cannot be had (the caller then falls back to a trained BPE).
"""
import base64, json, os, pathlib, subprocess, sys, zipfile

DASHSCOPE = "dashscope==2.0.2"   # any version ships dashscope/resources/qwen.tiktoken; pinned for a stable cache
TIKTOKEN_IN_WHEEL = "dashscope/resources/qwen.tiktoken"
SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# (id, content, special) of the Qwen2.5 added tokens
ADDED = [(151643, "<|endoftext|>", True), (151644, "<|im_start|>", True), (151645, "<|im_end|>", True),
         (151646, "<|object_ref_start|>", True), (151647, "<|object_ref_end|>", True),
         (151648, "<|box_start|>", True), (151649, "<|box_end|>", True), (151650, "<|quad_start|>", True),
         (151651, "<|quad_end|>", True), (151652, "<|vision_start|>", True), (151653, "<|vision_end|>", True),
         (151654, "<|vision_pad|>", True), (151655, "<|image_pad|>", True), (151656, "<|video_pad|>", True),
         (151657, "<tool_call>", False), (151658, "</tool_call>", False), (151659, "<|fim_prefix|>", False),
         (151660, "<|fim_middle|>", False), (151661, "<|fim_suffix|>", False), (151662, "<|fim_pad|>", False),
         (151663, "<|repo_name|>", False), (151664, "<|file_sep|>", False)]


def cache_dir():
    d = pathlib.Path(os.environ.get("OMNISHARD_CACHE_DIR", pathlib.Path.home() / ".cache" / "omnishard"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def bytes_to_unicode():
    """The GPT-2 byte-level map: printable Latin-1 bytes map to themselves, the others to U+0100 upwards."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def fetch_tiktoken():
    """Return the bytes of qwen.tiktoken, or None (with the reason on stderr) when pip cannot fetch the wheel."""
    d = cache_dir()
    target = d / "qwen.tiktoken"
    if target.exists():
        return target.read_bytes()
    wheels = d / "wheels"
    wheels.mkdir(exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), DASHSCOPE],
                       capture_output=True, text=True, timeout=300)
    found = sorted(wheels.glob("dashscope-*.whl"))
    if r.returncode != 0 or not found:
        print(f"qwen_vocab: pip download {DASHSCOPE} failed: {r.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    with zipfile.ZipFile(found[-1]) as z:
        data = z.read(TIKTOKEN_IN_WHEEL)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(target)
    return data


def parse_ranks(data):
    ranks = {}
    for line in data.splitlines():
        if line.strip():
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def derive_merges(ranks):
    """For each multi-byte token, run rank-BPE over its bytes with only lower-ranked tokens: two parts remain."""
    merges = []
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) == 1:
            continue
        parts = [tok[i:i + 1] for i in range(len(tok))]
        while True:
            best, at = None, -1
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and r < rank and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        if len(parts) != 2:
            raise ValueError(f"token rank {rank} does not split into two lower-ranked tokens: {parts}")
        merges.append((rank, parts[0], parts[1]))
    return merges


def build_tokenizer_json(ranks, merges_as_strings=False):
    b2u = bytes_to_unicode()
    enc = lambda b: "".join(b2u[x] for x in b)
    vocab = {enc(t): r for t, r in ranks.items()}
    merges = [f"{enc(a)} {enc(b)}" if merges_as_strings else [enc(a), enc(b)] for _, a, b in derive_merges(ranks)]
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": s} for i, c, s in ADDED]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": SPLIT_REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def get_tokenizer_json(merges_as_strings=False):
    """Path of the built Qwen2.5 tokenizer.json (cached), or None if the vocabulary cannot be fetched."""
    name = "qwen2.5-tokenizer-strmerges.json" if merges_as_strings else "qwen2.5-tokenizer.json"
    path = cache_dir() / name
    if path.exists():
        return path
    data = fetch_tiktoken()
    if data is None:
        return None
    tj = build_tokenizer_json(parse_ranks(data), merges_as_strings)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(tj, ensure_ascii=False))
    tmp.replace(path)
    return path


if __name__ == "__main__":
    print(get_tokenizer_json())
