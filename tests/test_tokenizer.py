"""omnishard's Qwen2 tokenizer (src/tokenizer/tok*.c, `omnishard tokenize`) against Hugging Face `tokenizers`.

The oracle is HF `tokenizers` loading the same tokenizer.json: the real Qwen2.5 one, built from the Qwen2
vocabulary that the `dashscope` wheel ships (tests/oracle/qwen_vocab.py), and a small byte-level BPE trained here
with HF's BpeTrainer. When the wheel cannot be fetched, the Qwen2.5 cases run on the trained BPE instead (said in
the output). Every line of a varied corpus must give identical ids; decode(encode(x)) must equal NFC(x).
"""
import functools, json, random, shutil, subprocess, unicodedata, warnings

import pytest
from conftest import BIN
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

import oracle.qwen_vocab as qv

CORPUS = [
    "Hello world", " Hello world", "", " ", "a", "\t", "hello\tworld",
    "The quick brown fox jumps over the lazy dog. It's 3.14159 o'clock; 1234567 apples cost $1,299.99!",
    "I'M here, You'Re there, WE'LL see, they'VE gone, she'S it, he'D go, don'T",
    "'s 're 'S 'ſ  ʼs",
    "我们今天去公园散步，天气很好。机器学习是人工智能的一个分支。",
    "東京は日本の首都です。カタカナとひらがなと漢字。",
    "안녕하세요, 세계! 한국어 텍스트입니다.",
    "مرحبا بالعالم، هذه جملة عربية. ١٢٣٤٥",
    "Здравствуй, мир! Ελληνικά κείμενα. עברית טקסט",
    "Mixed: English中文日本語한국어العربية Русский 123abc",
    "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷 🧑🏿‍🚀",
    "def f(x):\n\treturn x ** 2  # square\n\n\nclass A:\n    def g(self):\n        pass\n",
    "    indented    with    spaces   \n\n\n   trailing   ",
    "numbers 0 00 007 1234567 3.14 -2.5e10 1,000,000 ½ ² ³ Ⅻ",
    "line one\r\nline two\r\n\r\nline three\rx\n",
    "tabs\t\t\tand\u00a0nbsp\u3000ideographic space\u2003em space\u200bzwsp\u180emvs",
    "\u180e'Re \u180e \u180e\u180e's \x85'S\u2028\u2029x\u205f\u1680 \x0b\x0c\x1c\x1d\x1e\x1f end",
    "Cafe\u0301 re\u0301sume\u0301 nai\u0308ve A\u030a n\u0303 \u1100\u1161\u11a8 e\u0323\u0302 o\u0302\u0323",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|><|endoftext|>",
    "text<|im_end|>more<|im_start|><|im_end|><|endoftext|x <tool_call>{\"a\": 1}</tool_call><|fim_prefix|>",
    "a" * 300 + " " + "b" * 70 + "!" * 100 + " " * 80 + "z",
    "URL: https://example.com/path?q=1&r=2#frag email@example.org C:\\Windows\\path",
    "\x00nul\x01\x7f control\x1b[31m red",
    "   ",
    "\n\n\n",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ ﬁ ﬀ Å Ω",
]


def random_unicode_line(seed=1234, n=3000):
    """A long line of random characters from many scripts (blocks assigned well before Unicode 14)."""
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
              (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE5B), (0x1100, 0x11FF), (0x2000, 0x206F),
              (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1F64F),
              (0x9, 0xD)]
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        lo, hi = rng.choice(blocks)
        c = chr(rng.randint(lo, hi))
        if unicodedata.category(c) not in ("Cn", "Cs", "Co"):
            out.append(c)
    return "".join(out)


def train_bpe(path, corpus):
    """A byte-level BPE with the Qwen2 pipeline, trained by HF tokenizers on corpus; saved to path."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(qv.SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.train_from_iterator(corpus * 3, trainer=trainer)
    tok.save(str(path))
    return path


@pytest.fixture(scope="session")
def trained_json(tmp_path_factory):
    return train_bpe(tmp_path_factory.mktemp("tok") / "trained.json", CORPUS + [random_unicode_line(7, 2000)])


@pytest.fixture(scope="session")
def qwen_json(trained_json):
    path = qv.get_tokenizer_json()
    if path is None:
        msg = f"the real Qwen2.5 vocabulary could not be fetched (pip download {qv.DASHSCOPE}: no network?): using a trained BPE instead"
        print("\n" + msg)
        warnings.warn(msg)
        return trained_json, False
    print(f"\nusing the real Qwen2.5 vocabulary from {qv.DASHSCOPE} ({path})")
    return path, True


@pytest.fixture(params=["qwen2.5", "trained-bpe"])
def tokjson(request, qwen_json, trained_json):
    return qwen_json[0] if request.param == "qwen2.5" else trained_json


@functools.lru_cache(maxsize=None)
def hf_load(path):
    return Tokenizer.from_file(str(path))


def run(args, stdin, check=True):
    r = subprocess.run([str(BIN), "tokenize"] + args, input=stdin, capture_output=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r


def os_encode(path, texts):
    lines = "".join(json.dumps(t) + "\n" for t in texts).encode()
    out = run(["--tokenizer", str(path), "--json"], lines).stdout.decode().split("\n")[:-1]
    assert len(out) == len(texts)
    return [json.loads(x) for x in out]


def os_decode(path, id_lists, extra=()):
    lines = "".join(json.dumps(ids) + "\n" for ids in id_lists).encode()
    out = run(["--tokenizer", str(path), "--decode", "--json", *extra], lines).stdout.decode().split("\n")[:-1]
    assert len(out) == len(id_lists)
    return [json.loads(x) for x in out]


def test_hf_accepts_the_built_qwen_file(qwen_json):
    path, real = qwen_json
    if not real:
        pytest.skip(f"the real Qwen2.5 vocabulary could not be fetched (pip download {qv.DASHSCOPE}: no network?); the other tokenizer tests ran on a trained BPE")
    hf = hf_load(path)
    assert hf.encode("Hello world").ids == [9707, 1879]
    assert hf.encode(" Hello world").ids == [21927, 1879]
    assert hf.get_vocab_size() == 151665
    assert os_encode(path, ["Hello world", " Hello world"]) == [[9707, 1879], [21927, 1879]]


def test_ids_equal_hf_on_corpus(tokjson):
    hf = hf_load(tokjson)
    texts = CORPUS + [random_unicode_line()]
    got = os_encode(tokjson, texts)
    for text, ids in zip(texts, got):
        assert ids == hf.encode(text, add_special_tokens=False).ids, repr(text[:80])


def adversarial_texts(hf, seed, count):
    """Short random texts mixing decomposable characters, combining marks, jamo, odd spaces, contractions and
    added-token look-alikes. Marks that HF's NFC tables (Unicode 9.0) do not know are left out (docs/tokenizer.md)."""
    hf_nfc = hf.normalizer
    allc = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    def hf_knows(c):
        k = unicodedata.combining(c)
        t = ("x\u0301" + c) if k < 230 else ("x" + c + "\u0316")
        return not k or hf_nfc.normalize_str(t) == unicodedata.normalize("NFC", t)
    marks = [c for c in allc if unicodedata.combining(c)]
    known = [c for c in marks if hf_knows(c)]
    print(f"adversarial texts: {len(marks) - len(known)} combining marks unknown to HF's NFC left out")
    dec = [c for c in allc if unicodedata.decomposition(c) and c != "\U00011938"] + known
    jamo = [chr(c) for c in [*range(0x1100, 0x1113), *range(0x1161, 0x1176), *range(0x11A8, 0x11C3)]] + list("가각나")
    spaces = list("\u180e\x85\u2028\u2029\u200b\ufeff\xa0\u3000\u2000\u205f\x0b\x0c\x1c\x1f \n\r\t")
    apos = ["'s", "'S", "'ſ", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'m", "'M", "'ll", "'LL", "'d", "'D", "'K"]
    other = list("aeAEnN09.,;!?-_()[]{}<>|") + ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_", "<tool_call>"]
    groups = [dec, known, jamo, spaces, apos, other]
    rng = random.Random(seed)
    return ["".join(rng.choice(rng.choice(groups)) for _ in range(rng.randint(1, 30))) for _ in range(count)]


def test_ids_equal_hf_adversarial(tokjson):
    hf = hf_load(tokjson)
    texts = adversarial_texts(hf, 11, 1500)
    for text, ids in zip(texts, os_encode(tokjson, texts)):
        assert ids == hf.encode(text, add_special_tokens=False).ids, [hex(ord(c)) for c in text]


def test_plain_lines_mode(tokjson):
    """Without --json each line (minus its "\\n") is one text; CR is kept."""
    hf = hf_load(tokjson)
    texts = ["Hello world", "  two  spaces", "crlf line\r", "中文 한국어", ""]
    out = run(["--tokenizer", str(tokjson)], "".join(t + "\n" for t in texts).encode()).stdout.decode()
    assert [json.loads(x) for x in out.splitlines()] == [hf.encode(t).ids for t in texts]


def test_roundtrip_is_nfc(tokjson):
    texts = CORPUS + [random_unicode_line(99, 1500)]
    ids = os_encode(tokjson, texts)
    assert os_decode(tokjson, ids) == [unicodedata.normalize("NFC", t) for t in texts]


def test_nfc_on_every_decomposable_character(qwen_json):
    """NFC of all characters that have a canonical decomposition, and of shuffled combining sequences."""
    path = qwen_json[0]
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF
             and (unicodedata.decomposition(chr(c)) or unicodedata.combining(chr(c)))]
    nfd = unicodedata.normalize("NFD", "".join(chars))
    rng = random.Random(5)
    marks = [c for c in chars if unicodedata.combining(c)]
    seqs = ["".join([rng.choice("aeiouAEOUnNcCsSzZ\u1100\uac00\u0b47\u0915")] + rng.sample(marks, rng.randint(1, 4)))
            for _ in range(400)]
    texts = ["".join(chars[i:i + 200]) for i in range(0, len(chars), 200)]
    texts += [nfd[i:i + 300] for i in range(0, len(nfd), 300)] + [" ".join(seqs)]
    assert os_decode(path, os_encode(path, texts)) == [unicodedata.normalize("NFC", t) for t in texts]


def test_decode_equals_hf(tokjson):
    """Including ids that are partial UTF-8 characters (replaced by U+FFFD like HF) and special tokens."""
    hf = hf_load(tokjson)
    n = hf.get_vocab_size()
    rng = random.Random(3)
    lists = [[rng.randrange(n) for _ in range(rng.randint(0, 12))] for _ in range(200)] + [[], [n - 1], [0]]
    assert os_decode(tokjson, lists) == [hf.decode(ids, skip_special_tokens=False) for ids in lists]
    # skip_special_tokens (omnishard infer's multi-round history): every added token, special or not, among others
    added = sorted(hf.get_added_tokens_decoder())
    lists = [[rng.randrange(n) for _ in range(4)] + [a] + [rng.randrange(n)] for a in added] + [added]
    want = [hf.decode(ids, skip_special_tokens=True) for ids in lists]
    assert os_decode(tokjson, lists, ["--skip_special_tokens"]) == want


def test_string_merges_give_same_ids(qwen_json, tmp_path):
    """merges written as "a b" strings (older tokenizer.json files) load to the same tokenizer."""
    path = qwen_json[0]
    tj = json.loads(pathlib_read(path))
    tj["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    alt = tmp_path / "strmerges.json"
    alt.write_text(json.dumps(tj, ensure_ascii=False))
    texts = CORPUS[:12]
    assert os_encode(alt, texts) == os_encode(path, texts)


def pathlib_read(p):
    with open(p, encoding="utf-8") as f:
        return f.read()


def test_long_lines(qwen_json):
    path = qwen_json[0]
    hf = hf_load(path)
    texts = [" " * 50000 + "x", "x" * 50000, "字" * 20000, "\u0301" * 3000, "ab " * 20000 + "\n" * 5000]
    got = os_encode(path, texts)
    for t, ids in zip(texts, got):
        assert ids == hf.encode(t).ids, repr(t[:20])


# ---- errors: non-zero exit, a clear message, no crash ----

def err(args, stdin=b""):
    r = run(args, stdin, check=False)
    msg = r.stderr.decode(errors="replace")
    assert r.returncode == 1, (r.returncode, msg)
    assert "Sanitizer" not in msg and "runtime error" not in msg, msg
    return msg


def test_error_missing_file(tmp_path):
    msg = err(["--tokenizer", str(tmp_path / "nope.json")], b"hi\n")
    assert "nope.json: cannot open" in msg


def test_a_model_directory_means_its_tokenizer_json(trained_json, tmp_path):
    """--tokenizer MODEL_DIR reads MODEL_DIR/tokenizer.json (was: a 2^63-byte allocation from a directory's size)."""
    (tmp_path / "model").mkdir()
    shutil.copy(trained_json, tmp_path / "model" / "tokenizer.json")
    texts = CORPUS[:3]
    assert os_encode(tmp_path / "model", texts) == [hf_load(trained_json).encode(t).ids for t in texts]


def test_error_a_directory_without_tokenizer_json(tmp_path):
    msg = err(["--tokenizer", str(tmp_path)], b"hi\n")
    assert f"{tmp_path}/tokenizer.json: cannot open" in msg and "out of memory" not in msg, msg


def test_error_malformed_json(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"model": {"vocab": {"a": 0}, ')
    assert "bad.json: not valid JSON" in err(["--tokenizer", str(p)], b"hi\n")


@pytest.mark.parametrize("edit,words", [
    (lambda tj: tj.update(pre_tokenizer={"type": "Whitespace"}), ["pre_tokenizer.type", "Whitespace"]),
    (lambda tj: tj.update(normalizer={"type": "NFKC"}), ["normalizer.type", "NFKC"]),
    (lambda tj: tj["model"].update(type="WordPiece"), ["model.type", "WordPiece"]),
    (lambda tj: tj["model"]["merges"].append(["zzzq", "qqqz"]), ["model.merges[", "not in model.vocab"]),
    (lambda tj: tj["model"]["vocab"].update({"x1": "seven"}), ["model.vocab[\"x1\"]", "expected an integer id"]),
    (lambda tj: tj["model"]["vocab"].update({"zz_dup": 5}), ["model.vocab: id 5 is given to both", "and \"zz_dup\""]),
    (lambda tj: tj["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(Regex="(unclosed"),
     ["pattern.Regex", "PCRE2 cannot compile"]),
    (lambda tj: tj["added_tokens"][0].update(lstrip=True), ["added_tokens[0].lstrip", "not supported"]),
])
def test_error_unsupported_or_broken_fields(trained_json, tmp_path, edit, words):
    tj = json.loads(pathlib_read(trained_json))
    edit(tj)
    p = tmp_path / "edited.json"
    p.write_text(json.dumps(tj))
    msg = err(["--tokenizer", str(p)], b"hi\n")
    assert "edited.json" in msg and all(w in msg for w in words), msg


def test_error_invalid_utf8(trained_json):
    msg = err(["--tokenizer", str(trained_json)], b"fine\nok \xe4\xb8 broken\n")
    assert "line 2" in msg and "not valid UTF-8 at byte 3" in msg, msg
    for bad in [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"abc\xe4"]:
        assert "not valid UTF-8" in err(["--tokenizer", str(trained_json)], bad + b"\n")


def test_error_bad_decode_input(trained_json):
    n = hf_load(trained_json).get_vocab_size()
    msg = err(["--tokenizer", str(trained_json), "--decode"], b"[1,2]\n[1, %d]\n" % n)
    assert "line 2" in msg and f"id {n}" in msg and "out of range" in msg, msg
    msg = err(["--tokenizer", str(trained_json), "--decode"], b"[1,2]\n[1,2]\nnot json\n")
    assert "line 3" in msg and "JSON array" in msg, msg
    msg = err(["--tokenizer", str(trained_json), "--decode"], b"[1.5]\n")
    assert "line 1" in msg and "integer id" in msg, msg
    msg = err(["--tokenizer", str(trained_json), "--decode"], b"[-3]\n")
    assert "out of range" in msg, msg


def test_usage():
    r = subprocess.run([str(BIN), "tokenize", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--tokenizer FILE" in r.stdout and "--decode" in r.stdout
    r = subprocess.run([str(BIN), "tokenize"], capture_output=True, text=True)
    assert r.returncode == 2 and "--tokenizer FILE is required" in r.stderr
