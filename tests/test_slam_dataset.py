"""SLAM-Omni samples built by omnishard (src/dataset/slam_*.c, via build/tests/test_samples_tool) against the Python
port of the reference rules (tests/oracle/slam_samples_ref.py, HF `tokenizers` for the text ids), plus the
errors and skips of docs/dataset.md."""
import json, os, subprocess, wave

import pytest
from conftest import BUILD

from oracle import slam_samples_ref as ref

TOOL = BUILD / "tests" / "test_samples_tool"
SPACES = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())   # what Python's str.strip() removes


def tool(data, model, max_length=4096, trunc="right", extra=(), check=True):
    p = subprocess.run([str(TOOL), str(data), str(model), str(max_length), trunc, *map(str, extra)],
                       capture_output=True, text=True, timeout=60)
    if check:
        assert p.returncode == 0, p.stderr
        lines = [json.loads(l) for l in p.stdout.splitlines()]
        return lines[:-1], lines[-1], p.stderr
    return p


def write_wav(path, seconds=0.1):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes(b"\0\0" * int(16000 * seconds))


@pytest.fixture(scope="module", params=[3, 1, 2], ids=lambda g: f"G{g}")
def model(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"model_g{request.param}")
    ref.train_tokenizer(d / "tokenizer.json", vocab_size=320)
    json.dump({"code_layer": request.param, "padded_text_vocabsize": 512, "padded_audio_vocabsize": 80},
              open(d / "slam_omni.json", "w"))
    return d, request.param


def records(d):
    """Every case of the issue: text/speech questions, answer text longer/shorter than the audio, audio lengths
    not a multiple of G, history (inline and as a field), system prompts, asr and tts, non-ASCII text."""
    write_wav(d / "q1.wav")
    os.makedirs(d / "audio", exist_ok=True)
    write_wav(d / "audio" / "q2.wav")
    long_text = "This answer text is much longer than its audio, with many many words in it, really."
    return [
        {"key": "t-short-text", "source_text": "<USER>: What is the weather?", "target_text": "Sunny.",
         "target_token": [k % 16 for k in range(40)]},                            # text shorter than audio
        {"key": "t-long-text", "source_text": "Tell me a story", "target_text": long_text,
         "target_token": [5, 6, 7, 8]},                                           # text longer than audio
        {"key": "t-equal", "source_text": "<USER>: hi", "target_text": "Hi", "target_token": [1, 2]},
        {"key": "s-wav", "source_wav": "q1.wav", "source_text": "<USER>: spoken question", "target_text": "Yes, it is.",
         "target_token": [3] * 10},                                               # speech question
        {"key": "s-hist", "source_wav": "audio/q2.wav",
         "source_text": "USER: What is water? ASSISTANT: A liquid. <USER>: And light?",
         "target_text": "A wave.", "target_token": list(range(15, 0, -1))},      # inline history
        {"key": "t-hist-field", "history": "USER: first turn ASSISTANT: reply ", "source_text": "second turn",
         "system_prompt": "You are a tiny test model.", "target_text": "Ok then.", "target_token": [9, 8, 7, 6, 5, 4, 3]},
        # asr: the transcript is source_text after its last <USER>: (Python-stripped), target_text is ignored
        {"key": "asr", "task_type": "asr", "source_wav": "q1.wav", "source_text": "<USER>:  the spoken words \n",
         "target_text": "an answer asr does not use"},
        {"key": "asr-no-user", "task_type": "asr", "source_wav": "q1.wav", "source_text": " transcript here "},
        {"key": "asr-tokens-history", "task_type": "asr", "source_wav": "q1.wav", "target_token": [1, 2, 3, 4, 5, 6, 7],
         "source_text": "USER: hi ASSISTANT: hello <USER>:" + SPACES + "\u200bnow\u200b" + SPACES},
        {"key": "tts", "task_type": "tts", "target_text": "Read this aloud please.", "target_token": list(range(11))},
        {"key": "tts-history-ignored", "task_type": "tts", "source_text": "USER: a ASSISTANT: b <USER>: c",
         "target_text": "Say it.", "target_token": [2] * 9},
        {"key": "s-hist-spaces", "source_text": SPACES + "USER: one\u3000ASSISTANT: two" + SPACES + "<USER>: three",
         "history": "\u00a0 USER: zero ASSISTANT: nil ", "target_text": "Four.", "target_token": [7] * 4},
        {"key": "s-empty-hist", "source_text": " \n <USER>: alone", "target_text": "Yes.", "target_token": [7] * 4},
        {"key": "unicode", "source_text": "<USER>: 你好吗? café", "target_text": "Très bien — 很好!",
         "target_token": [0, 15]},
        {"key": 17, "question": "Parquet names work too?", "answer": "They do.",
         "answer_cosyvoice_speech_token": [4, 4, 4, 4, 4]},
    ]


def check_samples(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w is None:   # skipped: one position without targets
            assert g["L"] == 1 and all(x == -100 for r in g["labels"] for x in r), g
            continue
        assert g["lead"] == w["lead"], (g["i"], g["lead"], w["lead"])
        assert g["ids"] == w["ids"], g["i"]
        assert g["labels"] == w["labels"], g["i"]
        assert g["speech"] == w["speech"], g["i"]
        if w.get("wav"):
            assert os.path.samefile(g["wav"], w["wav"])
        else:
            assert g["wav"] is None


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_samples_match_reference(tmp_path, model, fmt):
    mdir, G = model
    recs = records(tmp_path)
    data = tmp_path / f"data.{fmt}"
    if fmt == "jsonl":
        ref.write_jsonl(data, recs)
    else:
        data.write_text(json.dumps(recs, indent=2, ensure_ascii=False))
    got, tail, _ = tool(data, mdir)
    want, empty = ref.load(str(data), str(mdir / "tokenizer.json"), 512, 80, G, 4096)
    assert empty == 0 and tail == {"n": len(recs), "skipped": 0}
    check_samples(got, want)
    # the cases really are there
    La = [len(w["ids"][0]) - w["lead"] for w in want]
    assert any(w["speech"] for w in want) and any(not w["speech"] for w in want)
    text_rows = [w["labels"][G][w["lead"]:] for w in want]
    assert any(-100 in t for t in text_rows)                          # text shorter than audio
    assert any(-100 in w["labels"][0][w["lead"]:] for w in want)      # audio shorter than text
    assert len(set(La)) > 3


@pytest.mark.parametrize("trunc", ["right", "delete"])
def test_truncation(tmp_path, model, trunc):
    mdir, G = model
    recs = records(tmp_path)
    data = tmp_path / "data.jsonl"
    ref.write_jsonl(data, recs)
    for max_length in (40, 80, 120, 330, 360, 400):
        got, tail, err = tool(data, mdir, max_length, trunc)
        want, _ = ref.load(str(data), str(mdir / "tokenizer.json"), 512, 80, G, max_length, trunc)
        check_samples(got, want)
        assert all(g["L"] <= max_length for g in got)
        skipped = sum(w is None for w in want)
        assert tail["skipped"] == skipped
        if skipped:
            assert "sample skipped (counted, reported at the end)" in err and "data.jsonl:" in err
        if trunc == "right":   # every kept sample has at least one answer position
            assert all(g["L"] > g["lead"] for g, w in zip(got, want) if w is not None)


def test_truncation_trims_history_before_the_answer(tmp_path, model):
    mdir, G = model
    recs = [r for r in records(tmp_path) if r["key"] == "s-hist"]
    data = tmp_path / "data.jsonl"
    ref.write_jsonl(data, recs)
    full = tool(data, mdir)[0][0]
    La = full["L"] - full["lead"]
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(mdir / "tokenizer.json"))
    ns = len(tok.encode("<SYSTEM>: " + ref.DEFAULT_PROMPT["s2s"] + "\n ").ids)
    nh = len(tok.encode("USER: What is water? ASSISTANT: A liquid.\n ").ids)   # stripped + "\n " (the reference)
    base = 2 + ns + ref.T_S + 3
    # room for half of the history: the answer is whole, the history keeps its last nh//2 tokens
    got = tool(data, mdir, base + La + nh // 2)[0][0]
    assert got["lead"] == base + nh // 2 and got["L"] == base + nh // 2 + La
    assert [r[got["lead"]:] for r in got["labels"]] == [r[full["lead"]:] for r in full["labels"]]
    # no room for all of the answer: no history, the answer's end is cut
    got = tool(data, mdir, base + La - 2)[0][0]
    assert got["lead"] == base and got["L"] == base + La - 2
    assert [r[got["lead"]:] for r in got["labels"]] == [r[full["lead"]:full["L"] - 2] for r in full["labels"]]
    # delete: skipped and counted
    got, tail, err = tool(data, mdir, full["L"] - 1, "delete")
    assert got[0]["L"] == 1 and tail["skipped"] == 1 and "data.jsonl:1: sample skipped" in err
    # no room for any answer position: skipped and counted under right too
    got, tail, err = tool(data, mdir, base, "right")
    assert got[0]["L"] == 1 and tail["skipped"] == 1 and "no room for the answer" in err


def test_speech_positions_follow_the_encoder(tmp_path, model):
    mdir, G = model
    data = tmp_path / "data.jsonl"
    ref.write_jsonl(data, records(tmp_path))
    got, _, _ = tool(data, mdir, extra=["--speech_positions", 7])
    want, _ = ref.load(str(data), str(mdir / "tokenizer.json"), 512, 80, G, 4096, T_s=7)
    check_samples(got, want)
    assert sum(sum(g["speech"] or []) for g in got) == 7 * sum(1 for w in want if w["speech"])


def test_collation(tmp_path, model):
    mdir, G = model
    recs = records(tmp_path)
    data = tmp_path / "data.jsonl"
    ref.write_jsonl(data, recs)
    got, _, _ = tool(data, mdir, extra=["--collate", 3, "--pad", 7])
    want, _ = ref.load(str(data), str(mdir / "tokenizer.json"), 512, 80, G, 4096)
    batches = [ref.collate(want[i:i + 3], 7, G) for i in range(0, len(want), 3)]
    assert len(got) == len(batches)
    for g, w in zip(got, batches):
        assert g == w


def test_pretokenized_still_works(tmp_path, model):
    mdir, G = model
    rows = [[[512 + 1, 512 + 2, 512 + 3]] * G + [[5, 6, 7]], [[512 + 4, 512 + 5]] * G + [[8, 9]]]
    data = tmp_path / "pre.jsonl"
    with open(data, "w") as f:
        for r in rows:
            f.write(json.dumps({"input_ids": r, "labels": [[-100] + x[1:] for x in r]}) + "\n")
    got, tail, _ = tool(data, mdir)
    assert [g["ids"] for g in got] == rows and tail["n"] == 2


BAD = {
    # name: (record lines as written, expected message parts); line 2 is the bad one
    "missing_wav": ('{"source_wav": "nope.wav", "target_text": "x", "target_token": [1]}',
                    ["data.jsonl:2: field 'source_wav': cannot read 'nope.wav'"]),
    "token_range": ('{"source_text": "q", "target_text": "x", "target_token": [1, 2, 16]}',
                    ["data.jsonl:2: field 'target_token': item 2: token 16 outside [0, 16)"]),
    "token_huge": ('{"source_text": "q", "target_text": "x", "target_token": [1, 3e121]}',
                   ["data.jsonl:2: field 'target_token': item 1: token 3e+121 outside [0, 16)"]),
    "token_fraction": ('{"source_text": "q", "target_text": "x", "target_token": [1.5]}',
                       ["data.jsonl:2: field 'target_token': item 0: expected an integer, got a number"]),
    "token_type": ('{"source_text": "q", "target_text": "x", "target_token": [1, "2"]}',
                   ["data.jsonl:2: field 'target_token': item 1: expected an integer, got a string"]),
    "malformed": ('{"source_text": "q", "target_text": "x", "target_token": [1,', ["data.jsonl:2: malformed JSON"]),
    "not_utf8": (b'{"source_text": "q\xff\xfe", "target_text": "x", "target_token": [1]}', ["data.jsonl:2: not valid UTF-8"]),
    "text_type": ('{"source_text": "q", "target_text": 5, "target_token": [1]}',
                  ["data.jsonl:2: field 'target_text': expected a string, got a number"]),
    "no_question": ('{"target_text": "x", "target_token": [1]}', ["data.jsonl:2: field 'source_wav' or 'source_text'"]),
    "no_tokens": ('{"source_text": "q", "target_text": "x"}', ["data.jsonl:2: field 'target_token': required"]),
    "task": ('{"task_type": "s2t", "source_text": "q", "target_text": "x", "target_token": [1]}',
             ["data.jsonl:2: field 'task_type': expected s2s, asr or tts, got 's2t'"]),
    "not_object": ('[1, 2]', ["data.jsonl:2: expected a JSON object"]),
    # a NUL cut the text silently at it ("q" trained, " hidden" lost): malformed JSON, raw or escaped
    "raw_nul": (b'{"source_text": "q\0 hidden", "target_text": "x", "target_token": [1]}',
                ["data.jsonl:2: malformed JSON: a NUL byte (byte 18 of the record)"]),
    "nul_escape": ('{"source_text": "q\\u0000 hidden", "target_text": "x", "target_token": [1]}',
                   ["data.jsonl:2: malformed JSON: a \\u0000 escape in a string (byte 18 of the record)"]),
    "escaped_backslash_then_nul": ('{"source_text": "a\\\\u0000", "target_text": "x\\u0000", "target_token": [1]}',
                                                 ["data.jsonl:2: malformed JSON: a \\u0000 escape in a string (byte 45 of the record)"]),
    "asr_no_transcript": ('{"task_type": "asr", "source_wav": "w.wav", "target_text": "x"}',
                          ["data.jsonl:2: field 'source_text': required by task_type asr"]),
    "ms_swift_messages": ('{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x"}]}',
                          ["data.jsonl:2: a record in ms-swift's / the OpenAI chat 'messages' format",
                           "omnishard reads SLAM-Omni records (source_wav or source_text, target_text, target_token"]),
    "history_not_s2s": ('{"task_type": "tts", "history": "USER: a", "target_text": "x", "target_token": [1]}',
                        ["data.jsonl:2: field 'history': only task_type s2s takes history, got task_type tts"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_errors_name_file_line_field(tmp_path, case):
    mdir = tmp_path / "m"
    os.makedirs(mdir)
    ref.train_tokenizer(mdir / "tokenizer.json", vocab_size=300)
    json.dump({"code_layer": 3, "padded_text_vocabsize": 512, "padded_audio_vocabsize": 80}, open(mdir / "slam_omni.json", "w"))
    bad, parts = BAD[case]
    good = b'{"source_text": "q", "target_text": "x", "target_token": [1]}\n'
    (tmp_path / "data.jsonl").write_bytes(good + (bad if isinstance(bad, bytes) else bad.encode()) + b"\n" + good)
    p = tool(tmp_path / "data.jsonl", mdir, check=False)
    assert p.returncode == 1, p.stdout
    for part in parts:
        assert part in p.stderr, p.stderr


def test_empty_answers_are_counted_skips(tmp_path, model):
    mdir, G = model
    lines = [{"source_text": "q", "target_text": "fine", "target_token": [1, 2]},
             {"source_text": "q", "target_text": "  ", "target_token": [1, 2]},
             {"source_text": "q", "target_text": "no audio", "target_token": []},
             {"task_type": "asr", "source_wav": "w.wav", "source_text": "<USER>: "},
             {"source_text": "q", "target_text": "also fine", "target_token": [3]}]
    write_wav(tmp_path / "w.wav")
    ref.write_jsonl(tmp_path / "data.jsonl", lines)
    got, tail, err = tool(tmp_path / "data.jsonl", mdir)
    assert tail == {"n": 2, "skipped": 3}
    for ln, why in ((2, "empty 'target_text'"), (3, "empty 'target_token'"), (4, "empty 'source_text'")):
        assert f"data.jsonl:{ln}: record skipped (counted): {why}" in err
    want, empty = ref.load(str(tmp_path / "data.jsonl"), str(mdir / "tokenizer.json"), 512, 80, G, 4096)
    assert empty == 3
    check_samples(got, want)


def test_tokenizer_must_fit_the_text_vocabulary(tmp_path):
    ref.train_tokenizer(tmp_path / "tokenizer.json", vocab_size=320)
    json.dump({"code_layer": 3, "padded_text_vocabsize": 300, "padded_audio_vocabsize": 80}, open(tmp_path / "slam_omni.json", "w"))
    ref.write_jsonl(tmp_path / "d.jsonl", [{"source_text": "q", "target_text": "x", "target_token": [1]}])
    p = tool(tmp_path / "d.jsonl", tmp_path, check=False)
    assert p.returncode == 1 and "leaves 236 for text" in p.stderr, p.stderr
