"""The exported directory loads in transformers unchanged and gives omnishard's logits."""
import json
import numpy as np
import torch
from safetensors.numpy import load_file
from transformers import Qwen2ForCausalLM

from oracle import slam_omni_ref as ref
from omni_run import sft, weights


def test_export_loads_in_transformers_with_same_logits(tmp_path):
    mdir, data = str(tmp_path / "model"), str(tmp_path / "data.jsonl")
    # a checkpoint with the plain Qwen vocabulary (fewer rows): omnishard resizes it to T + A
    ref.make_model(mdir, hidden=32, layers=2, heads=4, kv_heads=2, inter=64, T=192, A=80, G=3, tied=False, ckpt_vocab=150)
    ref.make_data(data, 3, G=3, T=192, A=80)
    sft(mdir, data, tmp_path / "o", 2, ["--learning_rate", "1e-2", "--max_length", "64"])
    final = tmp_path / "o" / "final_model"
    assert json.load(open(final / "config.json"))["vocab_size"] == 272
    one = tmp_path / "one.jsonl"
    one.write_text(open(data).readline())
    # a step with lr 0 on the exported model: the logits of its forward pass are omnishard's
    sft(final, one, tmp_path / "o2", 1, ["--learning_rate", "0", "--max_length", "64", "--dump_logits", tmp_path / "l.safetensors"])
    c = load_file(str(tmp_path / "l.safetensors"))["logits"]
    model = Qwen2ForCausalLM.from_pretrained(str(final), attn_implementation="eager").float()
    ids, lab = json.loads(one.read_text())["input_ids"], None
    emb = model.get_input_embeddings()(torch.tensor(ids)).mean(dim=0, keepdim=True)
    with torch.no_grad():
        r = model(inputs_embeds=emb).logits[0].numpy()
    assert c.shape == r.shape
    assert np.abs(c - r).max() <= 1e-4 * max(1.0, np.abs(r).max())


def test_vocabulary_resize_is_deterministic_and_sharding_independent(tmp_path):
    """New embedding rows (--new_rows_init normal; the default is tests/test_mean_resizing.py) and a missing adapter
    are initialised from the counter RNG: the same values on 1 rank and on 3 ranks at ZeRO-3 (each rank initialises
    only its own slice); the checkpoint's rows are kept."""
    import os
    mdir, data = str(tmp_path / "model"), str(tmp_path / "data.jsonl")
    ref.make_model(mdir, hidden=32, layers=2, heads=4, kv_heads=2, inter=64, T=192, A=80, G=3, tied=True, ckpt_vocab=150)
    os.remove(mdir + "/slam_omni.safetensors")     # the adapter is initialised as nn.Linear's default
    ref.make_data(data, 3, G=3, T=192, A=80)
    args = ["--learning_rate", "0", "--max_length", "64", "--new_rows_init", "normal"]
    sft(mdir, data, tmp_path / "a", 1, args)
    sft(mdir, data, tmp_path / "b", 1, [*args, "--deepspeed", "zero3"], np_=3)
    wa, wb = weights(tmp_path / "a" / "final_model"), weights(tmp_path / "b" / "final_model")
    for k in wa:
        assert np.array_equal(wa[k], wb[k]), k
    src = load_file(mdir + "/model.safetensors")["model.embed_tokens.weight"]
    e = wa["model.embed_tokens.weight"]
    assert np.array_equal(e[:150], src)
    new = e[150:]
    assert abs(new.std() - 0.02) < 0.002 and abs(new.mean()) < 0.002
    aw = wa["group_decode_adapter.linear.weight"]
    bound = 1 / np.sqrt(80)
    assert aw.shape == (240, 80) and np.abs(aw).max() <= bound and np.abs(aw).max() > 0.9 * bound
    assert abs(aw.std() - bound / np.sqrt(3)) < 0.05 * bound
