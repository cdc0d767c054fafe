"""SLAM-LLM checkpoints (the reference's `model.pt`) <-> omnishard model directories (docs/model-directory.md).

The reference (X-LANCE/SLAM-LLM, src/slam_llm/utils/checkpoint_handler.py save_model_checkpoint_peft) saves
`torch.save({name: tensor for the trainable parameters})` of its slam_model_s2s module: `llm.model.*` /
`llm.lm_head.weight` (the Qwen2 LLM; `llm.base_model.model.*` with PEFT, whose LoRA factors are
`...q_proj.lora_A.default.weight` / `lora_B`), `encoder_projector.*`, `group_decode_adapter.linear.*`, and
`encoder.*` when the Whisper encoder was trained. Frozen parts are absent and come from the base LLM directory.

  import: python tools/slam_checkpoint.py import --slam_pt model.pt --base QWEN_DIR --output_dir OUT
          [--lora_alpha A] [--code_layer G --padded_text_vocabsize T --padded_audio_vocabsize A]
          [--encoder_projector_ds_rate K] [--num_latency_tokens N] [--do_layershift] [--drop_encoder]
  export: python tools/slam_checkpoint.py export --model OMNISHARD_DIR --slam_pt model.pt

Needs PyTorch (the pickle format; loaded with weights_only=True), safetensors and transformers (parameter order).
"""
import argparse, json, os, re, shutil, sys
from collections import OrderedDict

import torch
from safetensors.torch import load_file, save_file

LORA = re.compile(r"^(.*)\.lora_([AB])\.([^.]+)\.weight$")
COPY = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json",
        "added_tokens.json", "generation_config.json")


def fail(msg):
    sys.exit(f"slam_checkpoint: {msg}")


def load_dir(d):
    """{name: tensor} of a Hugging Face directory (model.safetensors.index.json + shards, or model.safetensors)"""
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        out = {}
        for shard in sorted(set(json.load(open(idx))["weight_map"].values())):
            out.update(load_file(os.path.join(d, shard)))
        return out
    path = os.path.join(d, "model.safetensors")
    if not os.path.exists(path):
        fail(f"{d}: neither model.safetensors nor model.safetensors.index.json exists")
    return load_file(path)


def split(sd, pt):
    """model.pt names -> (LLM tensors by HF name, LoRA factors {module: {A, B}}, SLAM-Omni tensors, encoder names)"""
    llm, lora, slam, enc, other = {}, {}, {}, [], []
    for k, v in sd.items():
        if k.startswith("llm."):
            n = k[4:]
            n = n[len("base_model.model."):] if n.startswith("base_model.model.") else n
            m = LORA.match(n)
            if m:
                lora.setdefault(m.group(1), {})[m.group(2)] = v
            elif "lora_" in n or "modules_to_save" in n or "original_module" in n:
                fail(f"{pt}: tensor '{k}': this PEFT tensor kind is not supported (LoRA lora_A/lora_B only)")
            else:
                llm[n.replace(".base_layer.", ".")] = v
        elif k.startswith(("encoder_projector.", "group_decode_adapter.")):
            slam[k] = v
        elif k.startswith("encoder."):
            enc.append(k)
        else:
            other.append(k)
    if other:
        fail(f"{pt}: tensors of modules omnishard does not have: {', '.join(other[:5])}"
             f"{' ...' if len(other) > 5 else ''} ({len(other)} in all)")
    return llm, lora, slam, enc


def merge_lora(w, lora, alpha, pt):
    """W + (alpha / r) * B @ A for each LoRA-wrapped linear layer (PEFT's merge, no rsLoRA)"""
    if lora and alpha is None:
        fail(f"{pt}: holds LoRA factors ({len(lora)} layers): give --lora_alpha (model.pt does not record it; the "
             f"reference's default PeftConfig has lora_alpha 32, r 8)")
    for mod, f in sorted(lora.items()):
        if set(f) != {"A", "B"}:
            fail(f"{pt}: LoRA layer '{mod}': lora_A and lora_B must both be present")
        name = mod + ".weight"
        if name not in w:
            fail(f"{pt}: LoRA layer '{mod}': no base weight '{name}' in the base directory")
        a, b = f["A"].float(), f["B"].float()
        delta = (alpha / a.shape[0]) * (b @ a)
        if delta.shape != w[name].shape:
            fail(f"{pt}: LoRA layer '{mod}': B @ A has shape {list(delta.shape)}, the weight {list(w[name].shape)}")
        w[name] = (w[name].float() + delta).to(w[name].dtype)


def base_facts(base):
    """(the base's slam_omni.json or {}, the number of ids its tokenizer.json gives out or None)"""
    p = os.path.join(base, "slam_omni.json")
    cfg = json.load(open(p)) if os.path.exists(p) else {}
    p = os.path.join(base, "tokenizer.json")
    if not os.path.exists(p):
        return cfg, None
    tj = json.load(open(p))
    ids = list(tj.get("model", {}).get("vocab", {}).values()) + [t["id"] for t in tj.get("added_tokens", [])]
    return cfg, max(ids) + 1 if ids else None


def text_vocab(a, vocab, resized, audio, base):
    """T: the option, else the base's slam_omni.json (a base that already has the audio vocabulary), else the rows
    before the audio ones when model.pt resized the embedding, else the reference's 152000 (the rows omnishard adds
    to a text-only base); a base whose rows hold its tokenizer's text ids and an audio vocabulary, without a
    slam_omni.json to say where the text ends, is refused"""
    if a.padded_text_vocabsize:
        return a.padded_text_vocabsize
    bcfg, ntok = base_facts(base)
    if "padded_text_vocabsize" in bcfg:
        return bcfg["padded_text_vocabsize"]
    if resized:
        return vocab - audio
    if ntok is not None and vocab >= ntok + audio:
        fail(f"{base}: the embedding has {vocab} rows, room for the tokenizer's {ntok} ids and an audio vocabulary "
             f"of {audio}: a model that already has its audio rows, but without a slam_omni.json saying where the "
             f"text rows end; give --padded_text_vocabsize (e.g. {vocab - audio} = rows - audio vocabulary)")
    print(f"slam_checkpoint: note: padded_text_vocabsize 152000 (the reference's default; the base's {vocab} rows "
          f"are text rows, omnishard adds the rest); give --padded_text_vocabsize if the run used another",
          file=sys.stderr)
    return 152000


def slam_config(a, slam, vocab, resized):
    """slam_omni.json from the tensors' shapes, checked against the options given; resized: the embedding in
    model.pt has vocab rows, more than the base (then vocab = T + A)"""
    cfg = {"model_type": "slam_omni"}
    bcfg = base_facts(a.base)[0]
    G = a.code_layer or bcfg.get("code_layer")   # a base with the audio vocabulary says its sizes
    A = a.padded_audio_vocabsize or bcfg.get("padded_audio_vocabsize")
    aw = slam.get("group_decode_adapter.linear.weight")
    if aw is not None:
        A, G = aw.shape[1], aw.shape[0] // aw.shape[1]
        if G * A != aw.shape[0] or (a.code_layer not in (None, G)) or (a.padded_audio_vocabsize not in (None, A)):
            fail(f"group_decode_adapter.linear.weight {list(aw.shape)}: expected [G*A, A] with G = --code_layer "
                 f"{a.code_layer} and A = --padded_audio_vocabsize {a.padded_audio_vocabsize}")
        if a.do_layershift:
            fail("group_decode_adapter.*: a model with --do_layershift has no group-decode adapter")
    G, A = G or 3, A or 4160
    audio = G * A if a.do_layershift else A   # the reference's total_audio_vocabsize
    T = text_vocab(a, vocab, resized, audio, a.base)
    if T < 64 or A < 64:
        fail(f"text vocabulary {T} and audio vocabulary {A} must each be >= 64 (llm embedding rows {vocab}): give "
             f"--padded_text_vocabsize / --padded_audio_vocabsize")
    if (resized or vocab > T) and vocab != T + audio:
        fail(f"llm embedding has {vocab} rows, expected T + {'G*A' if a.do_layershift else 'A'} = {T} + {audio}: "
             f"give --padded_text_vocabsize / --code_layer / --padded_audio_vocabsize")
    cfg.update({"code_layer": G, "padded_text_vocabsize": T, "padded_audio_vocabsize": A,
                "num_latency_tokens": a.num_latency_tokens, "do_layershift": a.do_layershift})
    w1 = slam.get("encoder_projector.linear1.weight")
    if w1 is not None:
        cw = slam.get("encoder_projector.conv1d.weight")
        if cw is not None:
            k, d = cw.shape[2], cw.shape[0]
            cfg["encoder_projector"] = "cov1d-linear"
        else:
            k = a.encoder_projector_ds_rate
            if w1.shape[1] % k:
                fail(f"encoder_projector.linear1.weight {list(w1.shape)}: input width not a multiple of "
                     f"--encoder_projector_ds_rate {k}")
            d = w1.shape[1] // k
            cfg["encoder_projector"] = "linear"
        cfg.update({"encoder_dim": d, "projector_hidden": w1.shape[0], "encoder_projector_ds_rate": k})
    return cfg


def do_import(a):
    sd = torch.load(a.slam_pt, map_location="cpu", weights_only=True)
    llm, lora, slam, enc = split(sd, a.slam_pt)
    if enc and not a.drop_encoder:
        fail(f"{a.slam_pt}: holds {len(enc)} encoder.* tensors (a trained Whisper encoder); omnishard's encoder is "
             f"frozen and read from --speech_encoder: pass --drop_encoder to leave them out")
    config = json.load(open(os.path.join(a.base, "config.json")))
    w = load_dir(a.base)
    unknown = [n for n in llm if n not in w and n not in ("model.embed_tokens.weight", "lm_head.weight")]
    if unknown:
        fail(f"{a.slam_pt}: LLM tensors the base model does not have: {', '.join('llm.' + n for n in unknown[:5])}")
    for n, v in llm.items():   # the vocabulary rows may differ (resized), nothing else
        rows = n in ("model.embed_tokens.weight", "lm_head.weight")
        if n in w and (v.shape[1:] if rows else v.shape) != (w[n].shape[1:] if rows else w[n].shape):
            fail(f"{a.slam_pt}: tensor 'llm.{n}': shape {list(v.shape)} does not match the base's {list(w[n].shape)}")
    base_rows = w["model.embed_tokens.weight"].shape[0]
    w.update(llm)
    merge_lora(w, lora, a.lora_alpha, a.slam_pt)
    if config.get("tie_word_embeddings"):
        w.pop("lm_head.weight", None)
    vocab = w["model.embed_tokens.weight"].shape[0]
    if "model.embed_tokens.weight" not in llm:
        print(f"slam_checkpoint: note: {a.slam_pt} holds no embedding (frozen LLM or PEFT): the base's {vocab} rows "
              f"are kept and omnishard initialises the rows it lacks (--new_rows_init), not the reference's", file=sys.stderr)
    config["vocab_size"] = vocab
    os.makedirs(a.output_dir, exist_ok=True)
    save_file({k: v.contiguous() for k, v in w.items()}, os.path.join(a.output_dir, "model.safetensors"),
              metadata={"format": "pt"})
    json.dump(config, open(os.path.join(a.output_dir, "config.json"), "w"), indent=2)
    if slam:
        save_file({k: v.contiguous() for k, v in slam.items()}, os.path.join(a.output_dir, "slam_omni.safetensors"))
    json.dump(slam_config(a, slam, vocab, vocab > base_rows), open(os.path.join(a.output_dir, "slam_omni.json"), "w"), indent=2)
    for f in COPY:
        if os.path.exists(os.path.join(a.base, f)):
            shutil.copy(os.path.join(a.base, f), os.path.join(a.output_dir, f))
    print(f"slam_checkpoint: {a.output_dir}: {len(llm)} LLM tensors from {a.slam_pt}, {len(w) - len(llm)} from "
          f"{a.base}, {len(lora)} LoRA layers merged, {len(slam)} projector/adapter tensors")


def param_order(config):
    """Names in the order of the reference module's named_parameters(): llm (tied lm_head listed once)"""
    from transformers import Qwen2Config, Qwen2ForCausalLM
    with torch.device("meta"):
        m = Qwen2ForCausalLM(Qwen2Config(**config))
    return [n for n, _ in m.named_parameters()]


def do_export(a):
    config = json.load(open(os.path.join(a.model, "config.json")))
    w = load_dir(a.model)
    sp = os.path.join(a.model, "slam_omni.safetensors")
    slam = load_file(sp) if os.path.exists(sp) else {}
    out = OrderedDict()
    for n in param_order(config):
        if n not in w:
            fail(f"{a.model}: tensor '{n}' is missing")
        out["llm." + n] = w.pop(n)
    w.pop("lm_head.weight", None)   # tied: the reference saves it once, as the embedding
    if w:
        fail(f"{a.model}: tensors a Qwen2 LLM does not have: {', '.join(sorted(w)[:5])}")
    for prefix in ("encoder_projector.", "group_decode_adapter."):   # the reference's module order
        for sub in ("conv1d.weight", "conv1d.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
                    "linear.weight", "linear.bias"):
            if prefix + sub in slam:
                out[prefix + sub] = slam.pop(prefix + sub)
    if slam:
        fail(f"{sp}: tensors the reference's modules do not have: {', '.join(sorted(slam)[:5])}")
    os.makedirs(os.path.dirname(os.path.abspath(a.slam_pt)), exist_ok=True)
    tmp = a.slam_pt + ".tmp"
    torch.save(out, tmp)
    os.replace(tmp, a.slam_pt)
    print(f"slam_checkpoint: {a.slam_pt}: {len(out)} tensors")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("import", help="SLAM-LLM model.pt (+ base LLM directory) -> omnishard model directory")
    i.add_argument("--slam_pt", required=True, help="the reference's model.pt")
    i.add_argument("--base", required=True, help="the Hugging Face Qwen2 directory the reference started from")
    i.add_argument("--output_dir", required=True)
    i.add_argument("--lora_alpha", type=float, help="PEFT lora_alpha of the run (needed when model.pt holds LoRA)")
    i.add_argument("--code_layer", type=int, help="G (default: from the adapter's shape, else 3)")
    i.add_argument("--padded_text_vocabsize", type=int, help="T (default: the base's slam_omni.json, else embedding rows - A when model.pt resized it, else 152000)")
    i.add_argument("--padded_audio_vocabsize", type=int, help="A (default: from the adapter's shape, else 4160)")
    i.add_argument("--encoder_projector_ds_rate", type=int, default=5, help="k of the linear projector (default 5)")
    i.add_argument("--num_latency_tokens", type=int, default=0, help="the run's num_latency_tokens (default 0)")
    i.add_argument("--do_layershift", action="store_true", help="the run used do_layershift (vocabulary T + G*A)")
    i.add_argument("--drop_encoder", action="store_true", help="leave out encoder.* tensors (a trained encoder)")
    e = sub.add_parser("export", help="omnishard model directory -> SLAM-LLM model.pt")
    e.add_argument("--model", required=True, help="omnishard model directory (final_model/ or `omnishard export`)")
    e.add_argument("--slam_pt", required=True, help="model.pt to write")
    a = ap.parse_args()
    do_import(a) if a.cmd == "import" else do_export(a)


if __name__ == "__main__":
    main()
