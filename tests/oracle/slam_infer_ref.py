"""PyTorch reference of SLAM-Omni generation (written from docs/spec/slam-omni.md "Inference", with the step
rules of the reference implementation's `generate`): omnishard infer must print the same tokens, with and without
its KV cache.

The prompt is the part of a training sample before its answer (slam_samples_ref.build, cut at `lead`). At each
step the model (transformers Qwen2ForCausalLM on the G+1-row mean of the embeddings; with transformers' KV cache as
the reference, or the whole sequence every step) predicts the next text token (argmax over logits[:T]) and G audio tokens (argmax per layer over the adapter's output on
logits[T:T+A], or logits[T:T+A] for G = 1); after eot the text row is fed back as pad_t, after any layer emitted eoa
the audio rows are fed back as pad_a; stop after max_new_tokens steps or when both streams ended.

Decoding options, ported from the reference (SLAM-LLM examples/s2s/model/slam_model_s2s.py, HEAD a68e78f):
`repetition_penalty` (:680-693, applied to each stream's logits over the ids that stream got at the earlier steps,
:400-403) and `sample_next_token` (:638-678: temperature, top-k, top-p, then argmax or a multinomial draw).
"""
import inspect
from collections import namedtuple

import torch
import torch.nn.functional as F

from oracle import slam_samples_ref as sref


def prompt(rec, tokenizer, T, A, G, T_s=sref.T_S, layershift=False):
    """Input ids [G+1][P] (audio rows +T), the speech mask [P] or None, and whether the task is asr, of a record
    (a question-only record gets placeholder answer fields: only the part before the answer is used)."""
    rec = dict(rec)
    rec.setdefault("target_text", ".")
    rec.setdefault("target_token", [0])
    if rec.get("task_type") == "asr":
        rec.setdefault("source_text", ".")   # the transcript (to be predicted)
    f = sref.fields(rec)
    enc = lambda s: tokenizer.encode(s).ids
    s = sref.build(f, sref.Vocab(T, A, G), enc, 1 << 40, "right", T_s, do_layershift=layershift)
    lead = s["lead"]
    return [row[:lead] for row in s["ids"]], (s["speech"][:lead] if s["speech"] else None), f["task"] == "asr"


def _embed(model, ids, speech, proj, G):
    emb = model.get_input_embeddings()(torch.tensor(ids)[None])   # [1, R, L, C]
    if proj is not None:
        P = speech.index(1)
        emb[0, :G, P:P + proj.shape[0]] = proj
    return emb.mean(dim=1)


@torch.no_grad()
def step_logits(model, adapter, ids, G, T, A, speech=None, proj=None, cache=None):
    """The last position's final hidden state h [C], lm_head logits z [V], text logits z[:T] and the audio logits
    [G, A] (the adapter on z[T:T+A]; without it z[T:T+G*A]: G = 1, or layer shift, slam_model_s2s.py:394-398) for
    input ids [G+1][L]. cache (a dict): transformers' KV cache as the reference's generate uses it
    (past_key_values, use_cache=True, slam_model_s2s.py:381-390; transformers 5 names the argument `cache`): the first call runs every position and keeps the
    cache, later calls run the new last position only."""
    L = len(ids[0])
    if cache is not None and cache.get("pkv") is not None:
        assert cache["len"] == L - 1
        x = _embed(model, [r[L - 1:] for r in ids], None, None, G)
        name = "cache" if "cache" in inspect.signature(model.model.forward).parameters else "past_key_values"
        out = model.model(inputs_embeds=x, position_ids=torch.tensor([[L - 1]]), use_cache=True, **{name: cache["pkv"]})
    else:
        x = _embed(model, ids, speech, proj, G)
        out = model.model(inputs_embeds=x, position_ids=torch.arange(L)[None], use_cache=cache is not None)
    if cache is not None:
        cache["pkv"], cache["len"] = getattr(out, "cache", None) or out.past_key_values, L
    h = out.last_hidden_state[0, -1]
    z = model.lm_head(h)
    al = z[T:T + G * A] if adapter is None else adapter.linear(z[T:T + A])
    return h, z, z[:T], al.reshape(G, A)


def repetition_penalty(logits, generated, penalty):
    """slam_model_s2s.py:680-693: the logits of the ids in `generated` (a list) divided by the penalty when >= 0,
    multiplied when < 0 (each id once: gather, then scatter)."""
    if penalty == 1.0 or not generated:
        return logits
    logits = logits.clone()[None]
    index = torch.tensor(generated, dtype=torch.long)[None]
    score = torch.gather(logits, -1, index)
    score = torch.where(score < 0, score * penalty, score / penalty)
    logits.scatter_(-1, index, score)
    return logits[0]


def filter_logits(logits, temperature=1.0, top_k=0, top_p=1.0):
    """slam_model_s2s.py:649-670: logits / temperature, then -inf outside the top k and outside the nucleus."""
    logits = logits / temperature
    if top_k > 0:
        top_k = min(top_k, logits.size(-1))
        values, _ = torch.topk(logits, top_k)
        logits[logits < values[..., [-1]]] = -float("Inf")
    if top_p < 1.0:
        sorted_logits, sorted_indices = torch.sort(logits, descending=True)
        cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
        remove = cumulative_probs > top_p
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = 0
        logits[sorted_indices[remove]] = -float("Inf")
    return logits


def sample_next_token(logits, do_sample=False, temperature=1.0, top_k=0, top_p=1.0, generator=None):
    """slam_model_s2s.py:638-678: argmax of the filtered logits, or a draw from their softmax."""
    logits = filter_logits(logits, temperature, top_k, top_p)
    if do_sample:
        return int(torch.multinomial(F.softmax(logits, dim=-1), num_samples=1, generator=generator))
    return int(torch.argmax(logits, dim=-1))


Step = namedtuple("Step", "h z xt xa")   # hidden state, lm_head logits, text and audio logits after the penalties


@torch.no_grad()
def generate(model, adapter, ids, G, T, A, max_new_tokens, speech=None, proj=None, text_only=False, trace=None,
             latency=0, layershift=False, text_penalty=1.0, audio_penalty=1.0, do_sample=False, temperature=1.0,
             top_k=0, top_p=1.0, generator=None, kv_cache=False):
    """Generation from input ids [G+1][P]; proj: the projector output [T_s, C] for the speech positions.
    trace (a list): gets a Step of every step. latency: num_latency_tokens, the first steps give pad_a
    (slam_model_s2s.py:412) and the codec stream starts after them (codec_utils.py:74); layershift: audio fed back
    as T + g*A + a (slam_model_s2s.py:372, snac_utils.py:21). text_penalty / audio_penalty: the reference's
    text_ / audio_repetition_penalty over every id that stream got before (pad_t, pad_a included: its
    generated_ids[:step]); do_sample ... top_p: sample_next_token's options (draws from `generator`). kv_cache:
    transformers' KV cache (the reference's way), else the whole sequence at every step."""
    V = sref.Vocab(T, A, G)
    ids = [list(r) for r in ids]
    text, audio = [], []
    generated = [[] for _ in range(G + 1)]   # every step's ids, as the reference's generated_ids
    text_end, audio_end = False, text_only
    steps = 0
    pick = lambda x: sample_next_token(x, do_sample, temperature, top_k, top_p, generator)
    cache = {} if kv_cache else None
    for step in range(max_new_tokens):
        h, z, xt, xa = step_logits(model, adapter, ids, G, T, A, speech, proj, cache)
        xt = repetition_penalty(xt, generated[G], text_penalty)
        xa = torch.stack([repetition_penalty(xa[g], generated[g], audio_penalty) for g in range(G)])
        if trace is not None:
            trace.append(Step(h, z, xt, xa))
        steps = step + 1
        t = V.pad_t if text_end else pick(xt.clone())
        if audio_end:
            a = [V.pad_a] * G
        else:
            a = [pick(xa[g].clone()) if step >= latency else V.pad_a for g in range(G)]
            audio.append(a)
            audio_end = V.eoa in a
        for g in range(G):
            generated[g].append(a[g])
        generated[G].append(t)
        if not text_end:
            if t == V.eot:
                text_end = True
            else:
                text.append(t)
        if text_end and audio_end:
            break
        for g in range(G):
            ids[g].append(T + (g * A if layershift else 0) + a[g])
        ids[G].append(t)
    codec = []
    for a in audio[latency:]:
        if V.eoa in a:
            codec += [x for x in a[:a.index(V.eoa)] if x < V.eoa]
            break
        codec += [x for x in a if x < V.eoa]
    # the length of the reference's generated_ids[0] (:342, cut to step+1 when both ended :436-439, and with layer
    # shift before the last layer's eoa :444-448): its multi-round loop strips the question when it is
    # max_new_tokens (generate_s2s_online_multi_round.py:223-225)
    glen = len(generated[0])
    if layershift and V.eoa in generated[G - 1]:
        glen = generated[G - 1].index(V.eoa)
    return dict(text_ids=text, audio=[[a[g] for a in audio] for g in range(G)], codec=codec, steps=steps,
                text_end=text_end, audio_end=V.eoa in sum(audio, []), generated_len=glen)


def decode(tokenizer, ids):
    """The text of the ids the tokenizer knows (special SLAM-Omni ids and ids past its vocabulary left out)."""
    n = tokenizer.get_vocab_size()
    return tokenizer.decode([i for i in ids if i < n], skip_special_tokens=False)
