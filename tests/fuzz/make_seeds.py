"""Writes the seed inputs of the fuzz targets (tests/fuzz/README.md) into tests/fuzz/corpus/<target>/seed_*, with the
libraries that define the formats: safetensors (torch), soundfile (libsndfile), transformers' config classes, and
HF tokenizers for the fixture model's tokenizer.json (tests/oracle/slam_samples_ref.train_tokenizer). Run from the
repository root with the venv's Python; the files are committed, so the replay tests need none of this. (A float
WAV carries a PEAK chunk with the time of writing: that seed differs on every run.)"""
import io, json, os, pathlib, struct, sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
CORPUS = HERE / "corpus"


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed_{name}").write_bytes(data if isinstance(data, bytes) else data.encode())


def fixture_wav():
    import soundfile as sf
    sf.write(str(HERE / "model" / "q.wav"), np.zeros(1600, np.float32), 16000, subtype="PCM_16")


def safetensors_seeds():
    import torch
    from safetensors.torch import save
    put("safetensors", "f32", save({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}))
    put("safetensors", "mixed", save({"a.weight": torch.ones(3, 2, dtype=torch.bfloat16),
                                      "b": torch.tensor([1, -2], dtype=torch.int64),
                                      "c": torch.tensor(0.5, dtype=torch.float16),
                                      "m": torch.tensor([True, False]), "e": torch.zeros(0, 4)},
                                     metadata={"format": "pt"}))
    hdr = json.dumps({"x": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}}).encode()
    put("safetensors", "f64", struct.pack("<Q", len(hdr)) + hdr + struct.pack("<d", 2.5))


def config_seeds():
    from transformers import Qwen2Config, WhisperConfig
    put("hfconfig", "qwen2", Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=600).to_json_string())
    put("hfconfig", "whisper", WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=4,
                                             encoder_ffn_dim=128).to_json_string())
    put("hfconfig", "slam_omni", json.dumps({"code_layer": 3, "padded_text_vocabsize": 512,
                                             "padded_audio_vocabsize": 80, "num_latency_tokens": 2,
                                             "do_layershift": True}))


def audio_seeds():
    import soundfile as sf
    t = np.arange(1600) / 16000.0
    x = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    for name, rate, data, fmt, sub in [("pcm16_16k", 16000, x, "WAV", "PCM_16"),
                                       ("stereo_f32_22k", 22050, np.stack([x, -x], 1), "WAV", "FLOAT"),
                                       ("u8_8k", 8000, x[:400], "WAV", "PCM_U8"),
                                       ("flac_44k", 44100, x, "FLAC", "PCM_24")]:
        b = io.BytesIO()
        sf.write(b, data, rate, format=fmt, subtype=sub)
        put("audio", name, b.getvalue())


def text_seeds():
    for i, text in enumerate(["Hello world, it's 2026!\n", "  <|im_start|>user\nna\u00efve caf\u00e9 \u4f60\u597d\r\n\t",
                              "<|endoftext|><|im_end|>x", "e\u0301 \ufb01 \U0001F600 123456 don't  ",
                              "<SYSTEM>: You are a helpful assistant.\n <USER>: hi"]):
        put("tokenizer", f"text{i}", text)
    put("tokenizer", "bad_utf8", b"ab\xc3(\xff\xed\xa0\x80cd")
    for i, lit in enumerate(['"plain"', '  "tab\\t nl\\n quote\\" back\\\\ slash\\/"  ', '"\\u00e9\\ud83d\\ude00\\u0000"',
                             '"caf\u00e9 \u4f60"', '"\\ud800"', '"bad\\x"']):
        put("json_string", f"lit{i}", lit)
    put("sft_args", "line", "\n".join(
        ["--model", "m/", "--dataset", "d.jsonl", "--output_dir", "o", "--deepspeed", "zero3", "--num_train_epochs", "2.5",
         "--learning_rate=1e-4", "--lr_scheduler_type", "cosine", "--max_length", "3072", "--torch_dtype", "bfloat16",
         "--param_loss", "l2:0.01:group_decode_adapter", "--loss_weights", "1,1,1,1", "--train_type", "lora",
         "--target_modules", "q_proj,v_proj", "--save_total_limit", "2", "--split_dataset_ratio", "0.1"]))
    put("tokenizer_json", "fixture", (HERE / "model" / "tokenizer.json").read_bytes())


def dataset_seeds():
    recs = [{"key": "t", "source_text": "<USER>: What is the weather?", "target_text": "Sunny.",
             "target_token": [k % 16 for k in range(40)]},
            {"key": "h", "history": "USER: first ASSISTANT: reply ", "source_text": "second turn",
             "system_prompt": "Tiny.", "target_text": "Ok then.", "target_token": [9, 8, 7, 6, 5]},
            {"key": "s", "source_wav": "q.wav", "source_text": "USER: a? ASSISTANT: b. <USER>: spoken",
             "target_text": "Yes.", "target_token": [3] * 10},
            {"key": "asr", "task_type": "asr", "source_wav": "q.wav", "source_text": "<USER>: transcribe me", "target_text": "x",
             "target_token": [1, 2, 3]},
            {"key": "tts", "task_type": "tts", "source_text": "Say this.", "target_text": "Say this.",
             "target_token": [4, 4, 4, 4, 4, 4]}]
    put("dataset", "slam_jsonl", "".join(json.dumps(r) + "\n" for r in recs))
    put("dataset", "slam_array", json.dumps(recs, indent=1))
    pre = [{"input_ids": [[1, 2, 3, 4]] * 4, "labels": [[-100, 2, 3, 4]] * 4},
           {"input_ids": [[5, 6]] * 4, "labels": [[-100, -100]] * 3 + [[5, 6]]}]
    put("dataset", "pretok", "".join(json.dumps(r) + "\n" for r in pre))
    put("dataset", "pretok_short", "\x81" + json.dumps(pre[0]) + "\n")   # first byte >= 128: max_length 24


if __name__ == "__main__":
    fixture_wav(), safetensors_seeds(), config_seeds(), audio_seeds(), text_seeds(), dataset_seeds()
    for d in sorted(CORPUS.iterdir()):
        print(d.name, len(list(d.iterdir())))
