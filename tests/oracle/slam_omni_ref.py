"""PyTorch reference for SLAM-Omni training (written from docs/spec/slam-omni.md).

Builds tiny random models with transformers' Qwen2ForCausalLM plus the group-decode adapter, writes
pretokenized datasets, and trains with torch.optim.AdamW, clip_grad_norm_ and transformers' get_scheduler,
recording losses, the first step's gradients and the final weights. The C trainer must reproduce these.
"""
import json, math, os
import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import Qwen2Config, Qwen2ForCausalLM, get_scheduler

MASK64 = (1 << 64) - 1


def _mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def rng_u64(key, i):
    return _mix64((_mix64(key) + (i + 1) * 0x9E3779B97F4A7C15) & MASK64)


def epoch_perm(n, seed, epoch):
    """The sample order definition of docs/training.md (Fisher-Yates on the counter RNG)."""
    key = rng_u64((seed ^ 0x5EED5EED) & MASK64, epoch)
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng_u64(key, i) % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


class Projector(torch.nn.Module):
    """SLAM-LLM's EncoderProjectorConcat: k consecutive encoder frames concatenated -> Linear -> ReLU -> Linear."""
    def __init__(self, d_enc, hidden, D, k=5):
        super().__init__()
        self.k = k
        self.linear1 = torch.nn.Linear(k * d_enc, hidden)
        self.relu = torch.nn.ReLU()
        self.linear2 = torch.nn.Linear(hidden, D)

    def forward(self, x):                               # x [T_enc, d] -> [T_enc // k, D]
        T = x.shape[0] // self.k * self.k
        x = x[:T].reshape(T // self.k, -1)
        return self.linear2(self.relu(self.linear1(x)))


class ProjectorCov1d(torch.nn.Module):
    """SLAM-LLM's EncoderProjectorCov1d (src/slam_llm/models/projector.py): Conv1d(d, d, k, stride k) -> ReLU ->
    Linear(d, hidden) -> ReLU -> Linear(hidden, D)."""
    def __init__(self, d_enc, hidden, D, k=5):
        super().__init__()
        self.conv1d = torch.nn.Conv1d(d_enc, d_enc, kernel_size=k, stride=k, padding=0)
        self.linear1 = torch.nn.Linear(d_enc, hidden)
        self.linear2 = torch.nn.Linear(hidden, D)

    def forward(self, x):                               # x [T_enc, d] -> [T_enc // k, D]
        x = self.conv1d(x.T[None])[0].T                 # the reference's transpose(1, 2) around the convolution
        return self.linear2(torch.relu(self.linear1(torch.relu(x))))


def add_projector(d, d_enc, hidden, D, k=5, seed=5, kind="linear"):
    """Random projector saved into d/slam_omni.safetensors (next to the adapter) and its sizes into slam_omni.json.
    kind: the reference's encoder_projector, "linear" (EncoderProjectorConcat) or "cov1d-linear"."""
    from safetensors.torch import load_file
    torch.manual_seed(seed)
    proj = (ProjectorCov1d if kind == "cov1d-linear" else Projector)(d_enc, hidden, D, k)
    path = f"{d}/slam_omni.safetensors"
    tensors = load_file(path) if os.path.exists(path) else {}
    tensors.update({f"encoder_projector.{n}": v.detach().contiguous() for n, v in proj.named_parameters()})
    save_file(tensors, path)
    cfg = json.load(open(f"{d}/slam_omni.json"))
    cfg.update({"projector_hidden": hidden, "encoder_dim": d_enc, "encoder_projector_ds_rate": k})
    if kind != "linear":
        cfg["encoder_projector"] = kind
    json.dump(cfg, open(f"{d}/slam_omni.json", "w"))
    return proj


def make_encoder(d, *, d_model=16, layers=2, heads=4, ffn=32, n_mels=80, max_pos=30, layout="model", seed=3):
    """A tiny random Whisper encoder saved to d as a WhisperModel ("encoder.*"), a WhisperForConditionalGeneration
    ("model.encoder.*") or a bare WhisperEncoder; norms and biases made non-trivial. Returns the eval-mode encoder."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration, WhisperModel
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    torch.manual_seed(seed)
    cfg = WhisperConfig(num_mel_bins=n_mels, d_model=d_model, encoder_layers=layers, encoder_attention_heads=heads,
                        encoder_ffn_dim=ffn, max_source_positions=max_pos, decoder_layers=1, decoder_attention_heads=2,
                        decoder_ffn_dim=16, max_target_positions=16, vocab_size=64, pad_token_id=0, bos_token_id=1,
                        eos_token_id=2, decoder_start_token_id=1)
    full = {"model": WhisperModel, "cond": WhisperForConditionalGeneration, "encoder": WhisperEncoder}[layout](cfg).float()
    enc = full if layout == "encoder" else full.get_encoder()
    with torch.no_grad():
        for n, p in enc.named_parameters():
            if p.ndim == 1:
                p.copy_(1.0 + 0.1 * torch.randn_like(p) if "norm" in n else 0.1 * torch.randn_like(p))
    full.save_pretrained(d, safe_serialization=True)
    return enc.eval()


def read_wav16(path):
    import wave
    with wave.open(str(path), "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == 16000, path
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0


def speech_features(encoder, wav):
    """WAV -> padded/trimmed to 2*max_source_positions*160 samples -> openai-whisper log-mel -> frozen encoder."""
    import whisper
    n = 2 * encoder.config.max_source_positions * 160
    x = torch.from_numpy(read_wav16(wav))
    x = torch.nn.functional.pad(x, (0, max(0, n - x.shape[0])))[:n]
    mel = whisper.log_mel_spectrogram(x, encoder.config.num_mel_bins)
    with torch.no_grad():
        return encoder(input_features=mel[None]).last_hidden_state[0]


class Adapter(torch.nn.Module):
    def __init__(self, A, G):
        super().__init__()
        self.linear = torch.nn.Linear(A, G * A)


def make_model(d, *, hidden=32, layers=2, heads=4, kv_heads=2, inter=64, T=192, A=80, G=3, tied=True, seed=0,
               ckpt_vocab=None, layershift=False, latency=0):
    """Random tiny SLAM-Omni model saved to d. ckpt_vocab < T+A saves a smaller (not yet resized) vocabulary.
    layershift: the reference's do_layershift (s2s_config.py:32-33: vocabulary T + G*A; no group-decode adapter, as
    its layer-shift recipes); latency: num_latency_tokens, written to slam_omni.json."""
    torch.manual_seed(seed)
    V = (T + A * (G if layershift else 1)) if G > 0 else T
    cfg = Qwen2Config(vocab_size=V, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, tie_word_embeddings=tied,
                      rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=512, bos_token_id=0, eos_token_id=1)
    model = Qwen2ForCausalLM(cfg).float()
    with torch.no_grad():   # make norms and biases non-trivial so their gradients are tested
        for n, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(1.0 + 0.1 * torch.randn_like(p) if "norm" in n else 0.1 * torch.randn_like(p))
    os.makedirs(d, exist_ok=True)
    if ckpt_vocab is not None and ckpt_vocab < V:
        small = Qwen2ForCausalLM(Qwen2Config(**{**cfg.to_dict(), "vocab_size": ckpt_vocab}))
        sd = {k: (v[:ckpt_vocab] if v.shape[0] == V and k in ("model.embed_tokens.weight", "lm_head.weight") else v)
              for k, v in model.state_dict().items()}
        small.load_state_dict(sd)
        small.save_pretrained(d, safe_serialization=True)
    else:
        model.save_pretrained(d, safe_serialization=True)
    adapter = None
    if G > 0:
        json.dump({"code_layer": G, "padded_text_vocabsize": T, "padded_audio_vocabsize": A, "do_layershift": layershift,
                   "num_latency_tokens": latency}, open(f"{d}/slam_omni.json", "w"))
        if G > 1 and not layershift:
            adapter = Adapter(A, G)
            save_file({f"group_decode_adapter.{k}": v.contiguous() for k, v in adapter.state_dict().items()},
                      f"{d}/slam_omni.safetensors")
    return model, adapter


def make_data(path, n, *, G=3, T=192, A=80, min_len=5, max_len=14, seed=1, ignore_prompt=True):
    """Random pretokenized samples: audio rows ids T+[0,A), text row [0,T); a -100 prompt region."""
    g = np.random.default_rng(seed)
    R = G + 1 if G > 0 else 1
    with open(path, "w") as f:
        for _ in range(n):
            L = int(g.integers(min_len, max_len + 1))
            ids, labels = [], []
            for r in range(R):
                audio = G > 0 and r < G
                raw = g.integers(0, A if audio else T, size=L)
                ids.append([int(x + (T if audio else 0)) for x in raw])
                lab = [int(x) for x in g.integers(0, A if audio else T, size=L)]
                if ignore_prompt:
                    p = int(g.integers(1, L // 2 + 1))
                    lab[:p] = [-100] * p
                k = int(g.integers(0, L))
                lab[k] = -100
                labels.append(lab)
            f.write(json.dumps({"input_ids": ids, "labels": labels}) + "\n")


def load_data(path, max_length, truncation="right"):
    """(ids, lab) per sample, or (ids, lab, (wav, speech_start)) for a sample with a speech input."""
    out = []
    for line in open(path):
        if not line.strip():
            continue
        o = json.loads(line)
        ids, lab = o["input_ids"], o["labels"]
        L = len(ids[0])
        s = 0
        if L > max_length:
            if truncation == "delete":
                continue
            s = L - max_length if truncation == "left" else 0
            ids = [r[s:s + max_length] for r in ids]
            lab = [r[s:s + max_length] for r in lab]
        if "speech_wav" in o:
            wav = os.path.join(os.path.dirname(path), o["speech_wav"])
            out.append((ids, lab, (wav, o["speech_start"] - s)))
        else:
            out.append((ids, lab))
    return out


def collate(samples, pad_id):
    """Right padding (pretokenized samples have no prompt/answer split)."""
    L = max(len(s[0][0]) for s in samples)
    R = len(samples[0][0])
    ids = torch.full((len(samples), R, L), pad_id, dtype=torch.long)
    lab = torch.full((len(samples), R, L), -100, dtype=torch.long)
    mask = torch.zeros((len(samples), L), dtype=torch.long)
    for i, smp in enumerate(samples):
        a, b = smp[0], smp[1]
        n = len(a[0])
        ids[i, :, :n] = torch.tensor(a)
        lab[i, :, :n] = torch.tensor(b)
        mask[i, :n] = 1
    return ids, lab, mask


def forward_losses(model, adapter, ids, lab, mask, G, T, A, speech=None, upcast=False, lazy=False):
    """Per-term (sum, count, correct) and the logits path of slam-omni.md. speech: per batch row None or
    (projector output [T_s, C], first speech position): every audio row's embedding there is replaced by it.
    upcast: cross-entropy on the logits converted to fp32 (what transformers' causal-LM loss does for a bf16 model).
    lazy: count and correct stay tensors on the model's device (no synchronisation: bench/bench_device.py)."""
    emb = model.get_input_embeddings()(ids)            # [B, R, L, C]
    for b, sp in enumerate(speech or []):
        if sp is not None:
            proj, P = sp
            emb[b, :G, P:P + proj.shape[0]] = proj
    x = emb.mean(dim=1)                                 # G+1-row mean
    B, R, L = ids.shape
    pos = torch.arange(L, device=ids.device).unsqueeze(0).expand(B, L)
    logits = model(inputs_embeds=x, attention_mask=mask, position_ids=pos).logits   # [B, L, V]
    terms = []
    text = logits[..., :T]
    tl = lab[:, G if G > 0 else 0, 1:]
    terms.append((text[:, :-1], tl))
    if G >= 1 and adapter is None:   # G = 1, or layer shift: layer i's own columns (slam_model_s2s.py:261-262)
        for i in range(G):
            terms.append((logits[..., T + A * i:T + A * (i + 1)][:, :-1], lab[:, i, 1:]))
    elif G > 1:
        al = adapter.linear(logits[..., T:T + A])       # [B, L, G*A]
        for i, chunk in enumerate(torch.split(al, A, dim=2)):
            terms.append((chunk[:, :-1], lab[:, i, 1:]))
    out = []
    for lg, y in terms:
        lg = lg.reshape(-1, lg.shape[-1])
        if upcast:
            lg = lg.float()
        y = y.reshape(-1)
        valid = y != -100
        s = F.cross_entropy(lg, y, ignore_index=-100, reduction="sum")
        correct = (lg.argmax(-1)[valid] == y[valid]).sum()
        out.append((s, valid.sum(), correct) if lazy else (s, int(valid.sum()), int(correct)))
    return out


def _bf16(x):
    return x.to(torch.bfloat16).to(x.dtype)


def _sum_to(g, shape):   # the gradient of a broadcast operand: summed over the broadcast leading dimensions
    while g.dim() > len(shape):
        g = g.sum(0)
    for i, n in enumerate(shape):
        if n == 1 and g.shape[i] != 1:
            g = g.sum(i, keepdim=True)
    return g


class _RoundedMM(torch.autograd.Function):
    """a @ b on bf16-rounded a and b, fp32 result; backward: da = r(g) @ r(b)^T, db = r(a)^T @ r(g)."""
    @staticmethod
    def forward(ctx, a, b):
        a, b = _bf16(a), _bf16(b)
        ctx.save_for_backward(a, b)
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        g = _bf16(g)
        return _sum_to(torch.matmul(g, b.transpose(-1, -2)), a.shape), _sum_to(torch.matmul(a.transpose(-1, -2), g), b.shape)


class RoundedMatmul(torch.overrides.TorchFunctionMode):
    """Every F.linear / matmul / @ / bmm on bf16-rounded inputs with fp32 accumulation and an fp32 result."""
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, w = args[0], args[1]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            y = _RoundedMM.apply(x, w.t())
            return y if b is None else y + b
        if func in (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.bmm):
            return _RoundedMM.apply(args[0], args[1])
        return func(*args, **kwargs)


class bf16_mode:
    def __init__(self, model, kind):
        assert kind in (None, "autocast", "inputs"), kind
        self.model, self.kind, self.ctx = model, kind, None

    def __enter__(self):
        if self.kind == "autocast":
            self.ctx = torch.autocast("cpu", dtype=torch.bfloat16)
        elif self.kind == "inputs":
            self.model.config._attn_implementation = "eager"   # SDPA would hide its products from the mode
            self.ctx = RoundedMatmul()
        if self.ctx:
            self.ctx.__enter__()

    def __exit__(self, *exc):
        if self.ctx:
            self.ctx.__exit__(*exc)


def train(model, adapter, data, *, G, T, A, steps, lr=1e-3, wd=0.0, max_grad_norm=1.0, warmup=0, sched="linear",
          batch=1, accum=1, seed=42, loss_weights=None, param_terms=(), epochs_total=None, encoder=None, projector=None,
          embed_row0=None, bf16=None):
    """Single-process reference of omnishard sft. Returns per-step logs, step-1 grads, final params.
    bf16 (omnishard's --torch_dtype bfloat16; the parameters, their gradients and AdamW stay fp32 either way):
    "autocast": the forward under torch.autocast("cpu", torch.bfloat16), as mixed-precision PyTorch trains (bf16
    products AND bf16 outputs of the linears, SDPA in bf16); "inputs": exactly omnishard's definition, every matrix
    product forward and backward on bf16-rounded inputs with fp32 results (RoundedMatmul; eager attention).
    encoder (frozen, eval) + projector (trained): the speech path for samples with a speech input.
    Freezing: parameters with requires_grad False are left out (no gradient, no optimizer state). embed_row0: only
    rows >= embed_row0 of embed_tokens / lm_head train, as the reference's partial_freeze_weights (SLAM-LLM
    examples/s2s/model/slam_model_s2s.py) does it: a hook zeroes the gradient of the rows below; and since AdamW's
    weight decay would still shrink them, those rows are put back after every step (omnishard freezes them fully)."""
    params = dict(model.named_parameters())
    if adapter is not None:
        params.update({f"group_decode_adapter.{k}": v for k, v in adapter.named_parameters()})
    if projector is not None:
        params.update({f"encoder_projector.{k}": v for k, v in projector.named_parameters()})
    params = {k: v for k, v in params.items() if v.requires_grad}
    kept = {}   # name -> (tensor, rows below embed_row0 as they were)
    for name, p in params.items():   # (under PEFT the names carry a "base_model.model." prefix)
        if embed_row0 is not None and name.endswith(("embed_tokens.weight", "lm_head.weight")):
            p.register_hook(lambda g, r0=embed_row0: torch.cat([torch.zeros_like(g[:r0]), g[r0:]]))
            kept[name] = (p, p.detach()[:embed_row0].clone())
    feats = {}
    decay = [p for p in params.values() if p.ndim >= 2]
    no_decay = [p for p in params.values() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    sch = get_scheduler(sched, opt, num_warmup_steps=warmup, num_training_steps=steps)
    w = loss_weights or ([1.0 / (G + 1)] * (G + 1) if G > 0 else [1.0])
    n = len(data)
    GB = batch * accum
    spe = (n + GB - 1) // GB
    logs, grads = [], None
    pad_id = 151643 if 151643 < (T + A if G > 0 else T) else 0
    for step in range(steps):
        epoch, base = step // spe, (step % spe) * GB
        perm = epoch_perm(n, seed, epoch)
        nonempty = sum(1 for j in range(accum) if base + j * batch < n)
        opt.zero_grad()
        tot, sums = 0.0, [[0.0, 0, 0] for _ in w]
        for k in range(accum):
            first = base + k * batch
            idx = [perm[first + i] for i in range(batch) if first + i < n]
            if not idx:
                continue
            ids, lab, mask = collate([data[i] for i in idx], pad_id)
            speech = []
            for i in idx:
                if len(data[i]) < 3:
                    speech.append(None)
                    continue
                wav, P = data[i][2]
                if wav not in feats:
                    feats[wav] = speech_features(encoder, wav)
                speech.append((projector(feats[wav]), P))
            with bf16_mode(model, bf16):
                terms = forward_losses(model, adapter, ids, lab, mask, G, T, A, speech)
            loss = sum(wt * s / c for wt, (s, c, _) in zip(w, terms) if c > 0) / nonempty
            if k == 0:
                for kind, coef, prefix in param_terms:
                    for name, p in params.items():
                        if name.startswith(prefix):
                            loss = loss + (coef * (p * p).sum() if kind == "l2" else 0.0 * p.sum())
            if loss.requires_grad:   # (frozen: a micro-batch may reach no trained parameter)
                loss.backward()
            tot += sum(wt * float(s.detach()) / c for wt, (s, c, _) in zip(w, terms) if c > 0)
            for acc, (s, c, corr) in zip(sums, terms):
                acc[0] += float(s.detach()); acc[1] += c; acc[2] += corr
        if projector is not None:   # a step without speech: the projector's gradient is zero, not absent (as with
            for q in projector.parameters():   # DDP's dummy term), so AdamW still applies momentum and decay
                if q.grad is None:
                    q.grad = torch.zeros_like(q)
        term_val = 0.0
        for kind, coef, prefix in param_terms:
            for name, p in params.items():
                if name.startswith(prefix) and kind == "l2":
                    term_val += float(coef * (p.detach().double() ** 2).sum())
        if step == 0:
            grads = {k: (v.grad.detach().clone() if v.grad is not None else torch.zeros_like(v)) for k, v in params.items()}
        gn = torch.nn.utils.clip_grad_norm_(list(params.values()), max_grad_norm if max_grad_norm > 0 else float("inf"))
        log = {"step": step + 1, "loss": tot / nonempty + term_val, "lr": sch.get_last_lr()[0], "grad_norm": float(gn),
               "text_loss": sums[0][0] / sums[0][1] if sums[0][1] else None}
        for i in range(1, len(w)):
            log[f"audio_loss_{i-1}"] = sums[i][0] / sums[i][1] if sums[i][1] else None
        logs.append(log)
        opt.step()
        with torch.no_grad():
            for p, old in kept.values():
                p[:old.shape[0]] = old
        sch.step()
    final = {k: v.detach().clone() for k, v in params.items()}
    return logs, grads, final
