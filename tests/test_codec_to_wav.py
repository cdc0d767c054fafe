"""tools/codec_to_wav.py (README "Hearing the answer"): the parts that run without CosyVoice's weights: the
`codec` field of omnishard infer's output is read and checked, and a missing CosyVoice clone is named with where to
get it. (The decoding itself needs CosyVoice-300M-SFT, which the tests do not download.)"""
import json, subprocess, sys

from conftest import ROOT

TOOL = [sys.executable, str(ROOT / "tools" / "codec_to_wav.py")]


def tool(tmp_path, obj, *extra):
    (tmp_path / "a.json").write_text(json.dumps(obj))
    return subprocess.run([*TOOL, "--input", tmp_path / "a.json", "--output", tmp_path / "a.wav", "--cosyvoice",
                           tmp_path / "nowhere", "--model", tmp_path / "nomodel", *extra],
                          capture_output=True, text=True, timeout=120)


def test_the_codec_field_is_checked(tmp_path):
    for obj, words in [({"text": "hi"}, "field 'codec'"), ({"codec": [1, 4096]}, "0..4095"),
                       ({"codec": [], "text_only": True}, "no audio")]:
        r = tool(tmp_path, obj)
        assert r.returncode != 0 and words in r.stderr, r.stderr


def test_a_missing_cosyvoice_is_named(tmp_path):
    r = tool(tmp_path, {"codec": [1, 2, 3]})
    assert r.returncode != 0 and "FunAudioLLM/CosyVoice" in r.stderr and "nowhere" in r.stderr, r.stderr
