"""tools/slam_checkpoint.py: the reference's model.pt (its trainable parameters, saved as SLAM-LLM's
save_model_checkpoint_peft does) -> omnishard model directory -> model.pt, on a model built like slam_model_s2s
(base Qwen2 resized by resize_token_embeddings, projector, group-decode adapter, frozen encoder); the imported
directory trains in omnishard and gives the reference LLM's logits; PEFT LoRA factors are merged as PEFT merges."""
import json, os, subprocess, sys
from collections import OrderedDict

import numpy as np
import torch
from safetensors.numpy import load_file
from transformers import Qwen2ForCausalLM

from conftest import ROOT
from oracle import slam_omni_ref as ref
from omni_run import sft, logs

T, A, G, N0 = 192, 80, 3, 150
TOOL = [sys.executable, str(ROOT / "tools" / "slam_checkpoint.py")]


class SlamS2S(torch.nn.Module):
    """slam_model_s2s's modules in their registration order (slam_model.py slam_model.__init__: encoder, llm,
    encoder_projector; slam_model_s2s.__init__: ..., group_decode_adapter)"""
    def __init__(self, encoder, llm, projector, adapter):
        super().__init__()
        self.encoder, self.llm, self.encoder_projector, self.group_decode_adapter = encoder, llm, projector, adapter


def save_model_checkpoint_peft(model, path):
    """Port of SLAM-LLM checkpoint_handler.py save_model_checkpoint_peft with save_trainable_only=True"""
    cpu_state = model.state_dict()
    state_dict = OrderedDict()
    for name, para in model.named_parameters():
        if para.requires_grad:
            state_dict[name] = cpu_state[name]
    torch.save(state_dict, path)


def base_dir(tmp_path, tied):
    """a plain Qwen2 checkpoint with N0 vocabulary rows (what the reference starts from)"""
    d = str(tmp_path / "base")
    ref.make_model(d, hidden=32, layers=2, heads=4, kv_heads=2, inter=48, T=T, A=A, G=G, tied=tied, ckpt_vocab=N0)
    for f in ("slam_omni.json", "slam_omni.safetensors"):
        os.remove(os.path.join(d, f))
    return d


def reference_model(base, projector, lora=None, vocab=T + A):
    torch.manual_seed(7)
    llm = Qwen2ForCausalLM.from_pretrained(base).float()
    if lora:   # slam_model.py setup_llm: get_peft_model before slam_model_s2s resizes the vocabulary
        from peft import LoraConfig, get_peft_model
        llm = get_peft_model(llm, LoraConfig(r=4, lora_alpha=lora, target_modules=["q_proj", "v_proj"],
                                             lora_dropout=0.05, task_type="CAUSAL_LM"))
        for n, p in llm.named_parameters():
            if "lora_B" in n:   # PEFT starts B at 0: make the merge non-trivial
                torch.nn.init.normal_(p, std=0.1)
    llm.resize_token_embeddings(vocab)   # slam_model_s2s.py:148
    encoder = torch.nn.Linear(16, 16)
    encoder.requires_grad_(False)        # freeze_encoder
    return SlamS2S(encoder, llm, projector, ref.Adapter(A, G))


def tool(*args, check=True, subprocess_=False):
    """The converter's command line, in this process (fast) or as a subprocess; returns (returncode, stderr)"""
    if subprocess_:
        p = subprocess.run([*TOOL, *map(str, args)], capture_output=True, text=True, timeout=300)
        rc, err = p.returncode, p.stderr
    else:
        import importlib.util, contextlib, io
        spec = importlib.util.spec_from_file_location("slam_checkpoint", TOOL[1])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        argv, sys.argv = sys.argv, ["slam_checkpoint.py", *map(str, args)]
        buf, rc = io.StringIO(), 0
        try:
            with contextlib.redirect_stderr(buf):
                mod.main()
        except SystemExit as e:
            rc, msg = (0, "") if e.code in (None, 0) else (1, str(e.code))
            buf.write(msg)
        finally:
            sys.argv = argv
        err = buf.getvalue()
    if check:
        assert rc == 0, err
    return rc, err


def assert_same(pa, pb):
    a, b = torch.load(pa, weights_only=True), torch.load(pb, weights_only=True)
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), k


def test_full_model_round_trip_trains_and_gives_the_logits(tmp_path):
    base = base_dir(tmp_path, tied=True)
    model = reference_model(base, ref.ProjectorCov1d(16, 24, 32))
    pt, out = tmp_path / "model.pt", tmp_path / "omni"
    save_model_checkpoint_peft(model, pt)
    assert "llm.lm_head.weight" not in torch.load(pt, weights_only=True)   # tied: listed once
    tool("import", "--slam_pt", pt, "--base", base, "--output_dir", out, subprocess_=True)   # the command line itself
    cfg = json.load(open(out / "slam_omni.json"))
    assert cfg == {"model_type": "slam_omni", "code_layer": G, "padded_text_vocabsize": T, "padded_audio_vocabsize": A,
                   "num_latency_tokens": 0, "do_layershift": False, "encoder_projector": "cov1d-linear", "encoder_dim": 16, "projector_hidden": 24,
                   "encoder_projector_ds_rate": 5}
    assert json.load(open(out / "config.json"))["vocab_size"] == T + A
    tool("export", "--model", out, "--slam_pt", tmp_path / "back.pt")
    assert_same(pt, tmp_path / "back.pt")

    # omnishard trains the imported directory; a step at lr 0 gives the reference LLM's logits and changes nothing
    data = tmp_path / "data.jsonl"
    ref.make_data(str(data), 1, G=G, T=T, A=A)
    sft(out, data, tmp_path / "run", 1, ["--learning_rate", "0", "--max_length", "64",
                                         "--dump_logits", tmp_path / "l.safetensors"])
    assert np.isfinite(logs(tmp_path / "run")[0]["loss"])
    ids = json.loads(data.read_text())["input_ids"]
    with torch.no_grad():
        emb = model.llm.get_input_embeddings()(torch.tensor(ids)).mean(dim=0, keepdim=True)
        r = model.llm(inputs_embeds=emb).logits[0].numpy()
    c = load_file(str(tmp_path / "l.safetensors"))["logits"]
    assert c.shape == r.shape and np.abs(c - r).max() <= 1e-4 * max(1.0, np.abs(r).max())
    tool("export", "--model", tmp_path / "run" / "final_model", "--slam_pt", tmp_path / "back2.pt")
    assert_same(pt, tmp_path / "back2.pt")


def test_layershift_model_imports_and_trains(tmp_path):
    """do_layershift: vocabulary T + G*A, no adapter; the options the reference's config held go to slam_omni.json"""
    base = base_dir(tmp_path, tied=True)
    model = reference_model(base, ref.Projector(16, 24, 32), vocab=T + G * A)
    model.group_decode_adapter = None
    pt, out = tmp_path / "model.pt", tmp_path / "omni"
    save_model_checkpoint_peft(model, pt)
    sizes = ["--padded_text_vocabsize", T, "--padded_audio_vocabsize", A]   # no adapter to read A from
    rc, err = tool("import", "--slam_pt", pt, "--base", base, "--output_dir", out, *sizes, check=False)
    assert rc != 0 and "T + A" in err, err   # without the option the vocabulary does not add up
    tool("import", "--slam_pt", pt, "--base", base, "--output_dir", out, *sizes, "--do_layershift",
         "--num_latency_tokens", 1)
    cfg = json.load(open(out / "slam_omni.json"))
    assert (cfg["do_layershift"], cfg["num_latency_tokens"], cfg["padded_text_vocabsize"]) == (True, 1, T)
    data = tmp_path / "data.jsonl"
    ref.make_data(str(data), 1, G=G, T=T, A=A)
    sft(out, data, tmp_path / "run", 1, ["--learning_rate", "0", "--max_length", "64"])
    tool("export", "--model", tmp_path / "run" / "final_model", "--slam_pt", tmp_path / "back.pt")
    assert_same(pt, tmp_path / "back.pt")


def test_peft_lora_is_merged_as_peft_does(tmp_path):
    base = base_dir(tmp_path, tied=False)
    model = reference_model(base, ref.Projector(16, 24, 32), lora=8)
    pt, out = tmp_path / "model.pt", tmp_path / "omni"
    save_model_checkpoint_peft(model, pt)
    sd = torch.load(pt, weights_only=True)
    assert "llm.base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight" in sd
    assert not [k for k in sd if "embed_tokens" in k or "q_proj.base_layer" in k]   # frozen under PEFT
    rc, err = tool("import", "--slam_pt", pt, "--base", base, "--output_dir", out, check=False)
    assert rc != 0 and "--lora_alpha" in err, err
    tool("import", "--slam_pt", pt, "--base", base, "--output_dir", out, "--lora_alpha", 8)
    merged = {k: v.numpy() for k, v in model.llm.merge_and_unload().state_dict().items()}
    got = load_file(str(out / "model.safetensors"))
    assert set(got) == set(merged)
    for k, v in got.items():
        want = merged[k][:N0] if k in ("model.embed_tokens.weight", "lm_head.weight") else merged[k]   # base rows
        np.testing.assert_allclose(v, want, rtol=1e-6, atol=1e-7, err_msg=k)
    assert not np.allclose(got["model.layers.0.self_attn.q_proj.weight"],
                           load_file(os.path.join(base, "model.safetensors"))["model.layers.0.self_attn.q_proj.weight"])
    assert json.load(open(out / "slam_omni.json"))["encoder_projector"] == "linear"
    data = tmp_path / "data.jsonl"
    ref.make_data(str(data), 2, G=G, T=T, A=A)
    sft(out, data, tmp_path / "run", 2, ["--learning_rate", "1e-3", "--max_length", "64"])
    assert all(np.isfinite(x["loss"]) for x in logs(tmp_path / "run"))

    # tensors omnishard has no place for are refused, naming them
    for extra, needle in [({"encoder.weight": torch.zeros(2, 2)}, "--drop_encoder"),
                          ({"tts_adapter.w": torch.zeros(2)}, "tts_adapter.w")]:
        torch.save({**sd, **extra}, tmp_path / "bad.pt")
        rc, err = tool("import", "--slam_pt", tmp_path / "bad.pt", "--base", base, "--output_dir", tmp_path / "bad",
                       "--lora_alpha", 8, check=False)
        assert rc != 0 and needle in err, err


def test_a_base_that_already_has_the_audio_vocabulary(tmp_path):
    """export, then import with --base an omnishard model (T + A rows already): T comes from the base's
    slam_omni.json (was 152000 for a model of T + A rows: infer then decoded garbage); without that file, a base
    whose rows hold its tokenizer's ids and an audio vocabulary is refused"""
    d = tmp_path / "omni"
    ref.make_model(str(d), hidden=32, layers=2, heads=4, kv_heads=2, inter=48, T=T, A=A, G=G)
    tool("export", "--model", d, "--slam_pt", tmp_path / "model.pt")
    tool("import", "--slam_pt", tmp_path / "model.pt", "--base", d, "--output_dir", tmp_path / "back")
    cfg = json.load(open(tmp_path / "back" / "slam_omni.json"))
    assert (cfg["padded_text_vocabsize"], cfg["padded_audio_vocabsize"], cfg["code_layer"]) == (T, A, G), cfg
    assert json.load(open(tmp_path / "back" / "config.json"))["vocab_size"] == T + A
    os.remove(d / "slam_omni.json")
    json.dump({"model": {"type": "BPE", "vocab": {f"t{i}": i for i in range(T - 10)}, "merges": []},
               "added_tokens": [{"id": T - 10, "content": "<|im_end|>"}]}, open(d / "tokenizer.json", "w"))
    rc, err = tool("import", "--slam_pt", tmp_path / "model.pt", "--base", d, "--output_dir", tmp_path / "b2", check=False)
    assert rc != 0 and "--padded_text_vocabsize" in err and f"e.g. {T}" in err, err
