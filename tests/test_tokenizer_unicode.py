"""The pre-tokenizer's letter and number classes follow Unicode 16, as Hugging Face tokenizers (Oniguruma) does,
not the Unicode 14 tables of Debian 12's PCRE2 (src/tokenizer/tok_regex.c, gc_table.c).

Oracle: HF `tokenizers` on the same tokenizer.json; the code points come from the PyPI package unicodedata2 16.0.0.
Each case runs twice: as omnishard runs on Debian 12 (PCRE2's own property tables, the text seen through stand-ins
for the code points whose category changed since Unicode 14) and with OMNISHARD_TOK_RANGES=1 (properties written
as explicit ranges, what runs with any other PCRE2).
"""
import json, os, subprocess, unicodedata

import pytest
import unicodedata2
from conftest import BIN
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

import oracle.qwen_vocab as qv

MODES = {"stand-ins": "0", "ranges": "1"}


def encode(path, texts, mode):
    lines = "".join(json.dumps(t) + "\n" for t in texts).encode()
    env = dict(os.environ, OMNISHARD_TOK_RANGES=MODES[mode])
    r = subprocess.run([str(BIN), "tokenize", "--tokenizer", str(path), "--json"], input=lines,
                       capture_output=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    out = r.stdout.decode().split("\n")[:-1]
    assert len(out) == len(texts)
    return [json.loads(x) for x in out]


def hf_encode(path, texts):
    return [e.ids for e in Tokenizer.from_file(str(path)).encode_batch(texts, add_special_tokens=False)]


def assert_same(path, texts, want, mode):
    want = want if want is not None else hf_encode(path, texts)
    got = encode(path, texts, mode)
    bad = [t for t, g, w in zip(texts, got, want) if g != w]
    assert not bad, f"{len(bad)} of {len(texts)} lines differ, e.g. {[ascii(t) for t in bad[:5]]}"


def contexts(ch):
    """one line that tells a letter, a number and anything else apart in the Qwen2 pattern"""
    return f"{ch}'s a{ch}1 !{ch}{ch}"


def changed_code_points():
    """code points whose category differs between Python's unicodedata (Unicode 14, as Debian 12's PCRE2) and 16"""
    return [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF
            and unicodedata.category(chr(c)) != unicodedata2.category(chr(c))]


def test_unicode_versions():
    assert unicodedata2.unidata_version == "16.0.0"
    assert unicodedata.unidata_version == "14.0.0"   # the base of the stand-in table (src/tokenizer/gc_table.c)


@pytest.fixture(scope="module")
def qwen():
    path = qv.get_tokenizer_json()
    if path is None:
        pytest.skip(f"the real Qwen2.5 vocabulary could not be fetched (pip download {qv.DASHSCOPE}: no network?); these checks need it")
    return path


@pytest.mark.parametrize("mode", MODES)
def test_issue_example(qwen, mode):
    # U+31350 (CJK Ext. H, Unicode 15) is a letter: "'s" stays one piece
    assert encode(qwen, ["\U00031350's"], mode) == [[172, 109, 235, 238, 594]]


@pytest.fixture(scope="module")
def letters_and_numbers(qwen):
    cps = [c for c in range(0x110000) if unicodedata2.category(chr(c))[0] in "LN"]
    assert len(cps) == 141028 + 1911
    texts = [" ".join(contexts(chr(c)) for c in cps[i:i + 16]) for i in range(0, len(cps), 16)]
    return texts, hf_encode(qwen, texts)


@pytest.mark.parametrize("mode", MODES)
def test_every_letter_and_number_of_unicode_16(qwen, letters_and_numbers, mode):
    assert_same(qwen, *letters_and_numbers, mode)


@pytest.fixture(scope="module")
def changed(qwen):
    cps = changed_code_points()
    assert len(cps) > 10000
    texts = [contexts(chr(c)) + " " + chr(c) + "x" + chr(c) + "\u0301" for c in cps]
    return texts, hf_encode(qwen, texts)


@pytest.mark.parametrize("mode", MODES)
def test_every_code_point_changed_since_unicode_14(qwen, changed, mode):
    assert_same(qwen, *changed, mode)


# Split patterns in Oniguruma syntax that use other forms of the General_Category properties
PATTERNS = [
    r"\p{Lu}+|\p{Ll}+|\p{Lo}+|\p{Lm}|\p{N}|\P{L}",
    r"[\P{L}x]+|\p{Letter}+",
    r"\p{^N}+|\p{Number}",
    r"\P{^L}+|\p{ decimal_number }+|\p{LC}|\p{So}+|[\p{Mn}\p{Mc}]+",
    r"\pL+|[^\p{L}\p{N}\s]+|\s+",   # \pL is the text "pL" in Oniguruma
    "\u2102|\\p{L}+|\\s+",           # a literal stand-in: no stand-ins then (U+A7CB must not match it)
    r"\x{A7CB}|\p{L}+|\s+",          # the same with an escape
]


def pattern_tokenizer(path, pattern, texts):
    """a byte-level BPE with the Split pattern, trained by HF on texts with room for every piece: a piece split
    differently then gives other ids"""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=20000, min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok.save(str(path))
    return path


@pytest.mark.parametrize("k", range(len(PATTERNS)))
def test_property_forms(tmp_path, k):
    cps = changed_code_points()[::7] + [0x41, 0x61, 0x1C5, 0x2B0, 0x4E00, 0x31, 0x661, 0x2167, 0xB2, 0x2102, 0x1D00,
                                        0x300, 0x903, 0xA9, 0x21]
    texts = ["".join(chr(c) for c in cps[i:i + 5]) + " pL \u2102\uA7CB\u2102 \uA7CB\u2102 " + chr(cps[i]) + "1"
             for i in range(len(cps))]
    path = pattern_tokenizer(tmp_path / "t.json", PATTERNS[k], texts)
    for mode in MODES:
        assert_same(path, texts, None, mode)
