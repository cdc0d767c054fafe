"""Python port of the SLAM-Omni sample rules (docs/spec/slam-omni.md "One training sample", and the
schema / truncation policy of docs/dataset.md), written independently of the C code, with Hugging Face
`tokenizers` for the text ids. omnishard's samples (src/dataset/slam_*.c) must equal these.

Also: a tiny byte-level BPE with the Qwen2 pre-tokenizer (for tiny test models) and the dataset generator used by
the tests, the demo and the end-to-end test.
"""
import json, os, random

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from oracle.qwen_vocab import SPLIT_REGEX

T_S = 300   # speech positions of a spoken question
DEFAULT_PROMPT = {
    "s2s": "Conduct a spoken conversation with the user. ",
    "asr": "Transcribe the provided audio into accurate text. ",
    "tts": "Generate a natural and expressive spoken version of the given text. ",
}


class Vocab:
    """Special ids relative to the padded vocabulary sizes T (text) and A (audio)."""

    def __init__(self, T, A, G):
        self.T, self.A, self.G = T, A, G
        self.eot, self.pad_t, self.input_t, self.answer_t, self.asr = (T - 64 + k for k in range(5))
        self.eoa, self.pad_a, self.input_a, self.answer_a = (A - 64 + k for k in range(4))


# ---------------------------------------------------------------- records

def read_records(path):
    """(line, dict) per record of a JSONL file or a JSON array file."""
    text = open(path, encoding="utf-8").read()
    if text.lstrip().startswith("["):
        # line of each element: decode incrementally
        dec, out, i = json.JSONDecoder(), [], text.index("[") + 1
        while True:
            while text[i] in " \t\r\n,":
                i += 1
            if text[i] == "]":
                return out
            obj, j = dec.raw_decode(text, i)
            out.append((text.count("\n", 0, i) + 1, obj))
            i = j
    return [(n + 1, json.loads(l)) for n, l in enumerate(text.split("\n")) if l.strip()]


def fields(rec):
    """The record's parts by the schema of docs/dataset.md; None when the answer is empty (skipped).
    The reference reads one manifest format and one task per run (speech_dataset_s2s.py:237-254, 230); omnishard
    takes both field spellings and a task per record."""
    task = rec.get("task_type", "s2s")
    wav = rec.get("source_wav", rec.get("question_audio"))
    if isinstance(wav, dict):
        wav = wav["path"]
    src = rec.get("source_text", rec.get("question"))
    target = rec.get("target_text", rec.get("answer"))
    tokens = rec.get("target_token", rec.get("answer_cosyvoice_speech_token"))
    question = None   # omnishard: a text question (the reference's s2s questions are spoken)
    if src is not None:
        k = src.rfind("<USER>:")
        question = (src[k + 7:] if k >= 0 else src).lstrip(" ")
    if task == "tts":
        wav = None
    if task == "asr":   # speech_dataset_s2s.py:298-301: the transcript; target_text is not used
        answer = src.split("<USER>:")[-1].strip() if "<USER>:" in src else src
    else:
        answer = target
    if answer is None or not answer.strip(" \t\r\n"):
        return None
    if task != "asr" and not tokens:
        return None
    system = rec.get("system_prompt") or DEFAULT_PROMPT[task]
    return dict(task=task, wav=wav, source_text=src, question=question, answer=answer,
                tokens=None if tokens is None else list(tokens), system=system, history=rec.get("history") or "")


# ---------------------------------------------------------------- the reference's sample, line by line
# X-LANCE/SLAM-LLM a68e78f, examples/s2s: speech_dataset_s2s.py (SpeechDatasetJsonl), utils/codec_utils.py,
# utils/snac_utils.py. Torch tensors become lists of rows; "-1" labels become -100 at the end as there (:362-363).

def layershift(V, input_id, layer, do_layershift):
    """snac_utils.py:21-25 (stride and shift are the real sizes 4160 and 152000 there; here A and T)."""
    return input_id + V.T + (layer * V.A if do_layershift else 0)


def get_single_layer_answer_token(audio_tokens, num_latency_tokens, padding_token, end_of_audio):
    """codec_utils.py:26-30"""
    audio_length = len(audio_tokens) + num_latency_tokens + 1
    result = [padding_token] * num_latency_tokens + list(audio_tokens) + [end_of_audio]
    return [result], audio_length


def get_group_answer_token(audio_tokens, num_latency_tokens, padding_token, end_of_audio, num_layers):
    """codec_utils.py:32-49"""
    padded_audio_tokens = audio_tokens + [end_of_audio]
    padding_needed = (num_layers - len(padded_audio_tokens) % num_layers) % num_layers
    padded_audio_tokens = padded_audio_tokens + [padding_token] * padding_needed
    total_length = len(padded_audio_tokens)
    audio_length = total_length // num_layers + num_latency_tokens
    result = []
    for layer in range(num_layers):
        layer_tokens = [padding_token] * num_latency_tokens
        layer_tokens.extend(padded_audio_tokens[layer::num_layers])
        result.append(layer_tokens)
    return result, audio_length


def get_input_ids(V, length, special_token_a, special_token_t, shift):
    """speech_dataset_s2s.py:162-172 (rows as lists)"""
    input_ids = []
    for i in range(V.G):
        item = [shift(V.input_a, i)] + [shift(V.pad_a, i)] * length + [shift(V.eoa, i), shift(special_token_a, i)]
        input_ids.append(item)
    input_ids.append([V.input_t] + [V.pad_t] * length + [V.eot, special_token_t])
    return input_ids


def get_padded_input(V, text_input_idx, text_index_length, shift):
    """:174-182"""
    return [[shift(V.pad_a, i)] * text_index_length for i in range(V.G)] + [list(text_input_idx)]


def get_answer_ids(V, length, shift):
    """:184-192"""
    return [[shift(V.pad_a, i)] * length for i in range(V.G)] + [[V.pad_t] * length]


def reference_sample(f, V, enc, T_s=T_S, num_latency_tokens=0, do_layershift=False, mask_equal_audio=False,
                     prompt_ids=None):
    """SpeechDatasetJsonl.__getitem__ (:228-363) for one record f (fields()), training mode, CosyVoice codes, no
    upsampling. omnishard's additions are marked "omnishard:". prompt_ids: the tokens of the prompt text (given by
    the truncation policy), else enc(prompt). mask_equal_audio: the reference's :357-358 when the text and the
    audio have the same length (labels[:G, -0:] masks every audio label); omnishard trains them by default.
    Returns dict(ids, labels, lead, speech)."""
    G = V.G
    shift = lambda x, i: layershift(V, x, i, do_layershift)
    task_type = f["task"]                                        # :230 (omnishard: per record)
    source_text, target_text = f["source_text"], f["answer"] if f["task"] != "asr" else None
    speech = f["wav"] is not None
    audio_length = T_s if speech else 0                          # :256-257, 146-158: mel 3000 -> 1500 -> // 5
    target_audio, target_audio_length = None, 0                  # :235
    if f["tokens"] is not None:                                  # :259-260 -> :136-141
        if G == 1:
            target_audio, target_audio_length = get_single_layer_answer_token(f["tokens"], num_latency_tokens, V.pad_a, V.eoa)
        else:
            target_audio, target_audio_length = get_group_answer_token(f["tokens"], num_latency_tokens, V.pad_a, V.eoa, G)
    prompt = "<SYSTEM>: {}\n ".format(f["system"])               # :265-266 (omnishard: the record's system prompt)
    # :268-272; omnishard: a 'history' field is written before the inline history
    history_src = source_text is not None and "<USER>:" in source_text
    if task_type == "s2s" and (history_src or f["history"]):
        history_chat = (f["history"] + (source_text.rsplit("<USER>:", 1)[0] if history_src else "")).strip()
        if history_chat:
            prompt = prompt + history_chat + "\n "
    prompt_ids = enc(prompt) if prompt_ids is None else prompt_ids   # :274
    prompt_ids = [V.input_t] + prompt_ids + [V.eot]                  # :275
    prompt_length = len(prompt_ids)                                  # :276
    prompt_ids = get_padded_input(V, prompt_ids, prompt_length, shift)   # :277
    special_token_a, special_token_t = V.answer_a, V.answer_t       # :61-62 (every task)
    text_in = None                                                   # omnishard: a text question goes where tts text goes
    if task_type == "tts":
        text_in = enc(f["answer"])                                   # :283
    elif not speech:
        text_in = enc(f["question"])
    if text_in is None:                                              # :279-281
        example_ids = get_input_ids(V, audio_length, special_token_a, special_token_t, shift)
    else:                                                            # :282-290
        example_ids = get_input_ids(V, len(text_in), special_token_a, special_token_t, shift)
        text_layer = example_ids[G]
        example_ids[G] = text_layer[:1] + text_in + text_layer[-2:]
    example_ids = [prompt_ids[i] + example_ids[i] for i in range(G + 1)]
    input_length = audio_length if text_in is None else len(text_in)  # :294-296
    if task_type == "asr":                                            # :298-301
        if "<USER>:" in source_text:
            source_text = source_text.split("<USER>:")[-1].strip()
        target_text = source_text
    answer_text_ids = enc(target_text)                               # :322-323
    answer_text_ids.append(V.eot)                                    # :330
    answer_length = max(len(answer_text_ids), target_audio_length)  # :333
    answer_ids = get_answer_ids(V, answer_length, shift)             # :334
    answer_ids[G] = answer_text_ids + answer_ids[G][len(answer_text_ids):]   # :335
    text_padding_length = target_audio_length - len(answer_text_ids)         # :336
    labels_ids = [list(r) for r in answer_ids]                       # :338
    ori_example_ids = [list(r) for r in example_ids]                 # :339
    if target_audio is not None:                                     # :341-344
        for i in range(G):
            labels_ids[i] = target_audio[i] + answer_ids[i][target_audio_length:]
            answer_ids[i] = [shift(x, i) for x in target_audio[i]] + labels_ids[i][target_audio_length:]
    for i in range(G + 1):                                           # :346-348
        example_ids[i] = ori_example_ids[i] + answer_ids[i]
        labels_ids[i] = ori_example_ids[i] + labels_ids[i]
    L = len(example_ids[0])
    lead = input_length + prompt_length + 3
    for r in labels_ids:                                             # :352
        r[:lead] = [-1] * lead
    if text_padding_length > 0:                                      # :354-355
        labels_ids[G][L - text_padding_length:] = [-1] * text_padding_length
    else:                                                            # :356-358 (-0: is the whole row)
        audio_padding_length = -text_padding_length
        if audio_padding_length > 0 or mask_equal_audio:             # omnishard: the equal case only on request
            for i in range(G):
                labels_ids[i][-audio_padding_length:] = [-1] * len(labels_ids[i][-audio_padding_length:])
    if task_type == "asr":   # slam_model_s2s.py:303: no audio loss for asr (omnishard: the labels say so)
        for i in range(G):
            labels_ids[i] = [-1] * L
    labels_ids = [[x if x >= 0 else -100 for x in r] for r in labels_ids]   # :362-363
    sp = None
    if speech:                                                       # :484-487: the modality mask
        sp = [0] * L
        sp[prompt_length + 1:prompt_length + 1 + audio_length] = [1] * audio_length
    return dict(ids=example_ids, labels=labels_ids, lead=lead, speech=sp)


# ---------------------------------------------------------------- one sample (with omnishard's truncation)

def build(f, V, enc, max_length, truncation, T_s=T_S, **opts):
    """dict(ids, labels, lead, speech) ([G+1][L] lists, speech [L] or None), or None when skipped. opts: the
    reference's options (reference_sample). Truncation is omnishard's (docs/dataset.md): the history is trimmed
    from the left, then the answer's end is cut."""
    s = reference_sample(f, V, enc, T_s, **opts)
    L = len(s["ids"][0])
    if L <= max_length:
        return s
    if truncation == "delete":
        return None
    sysp = f"<SYSTEM>: {f['system']}\n "
    sys_ids = enc(sysp)
    hist_text = ""
    full_prompt = s["lead"]   # P + S of the untrimmed sample
    src = f["source_text"]
    if f["task"] == "s2s":
        h = (f["history"] + (src.rsplit("<USER>:", 1)[0] if src is not None and "<USER>:" in src else "")).strip()
        hist_text = h + "\n " if h else ""
    hist_ids = enc(hist_text) if hist_text else []
    S = full_prompt - (2 + len(enc(sysp + hist_text)))
    La = L - full_prompt
    room = max_length - (2 + len(sys_ids) + S)
    kh = min(max(room - La, 0), len(hist_ids))
    if room < 1:
        return None
    s = reference_sample(f, V, enc, T_s, prompt_ids=sys_ids + (hist_ids[len(hist_ids) - kh:] if kh else []), **opts)
    keep = s["lead"] + min(room, La)
    return dict(ids=[r[:keep] for r in s["ids"]], labels=[r[:keep] for r in s["labels"]], lead=s["lead"],
                speech=s["speech"][:keep] if s["speech"] else None)


def load(path, tokenizer_json, T, A, G, max_length, truncation="right", T_s=T_S, **opts):
    """Every usable record's sample (None for one skipped at build), and the count skipped as empty."""
    tok = Tokenizer.from_file(tokenizer_json)
    enc = lambda s: tok.encode(s).ids
    V = Vocab(T, A, G)
    out, empty = [], 0
    for line, rec in read_records(path):
        f = fields(rec)
        if f is None:
            empty += 1
            continue
        s = build(f, V, enc, max_length, truncation, T_s, **opts)
        if s is not None and f["wav"]:
            base = os.path.dirname(path)
            w = os.path.join(base, f["wav"]) if not os.path.isabs(f["wav"]) else f["wav"]
            s["wav"] = w if os.path.exists(w) else f["wav"]
        out.append(s)
    return out, empty


def collate(samples, pad_id, G):
    """Prompt+input part left-padded, answer right-padded (slam-omni.md "Collation")."""
    lead = max(s["lead"] for s in samples)
    tail = max(len(s["ids"][0]) - s["lead"] for s in samples)
    out = dict(ids=[], labels=[], keymask=[], speech=[])
    for s in samples:
        left, right = lead - s["lead"], tail - (len(s["ids"][0]) - s["lead"])
        out["ids"].append([[pad_id] * left + r + [pad_id] * right for r in s["ids"]])
        out["labels"].append([[-100] * left + r + [-100] * right for r in s["labels"]])
        out["keymask"].append([0] * left + [1] * len(s["ids"][0]) + [0] * right)
        out["speech"].append([0] * left + (s["speech"] or [0] * len(s["ids"][0])) + [0] * right)
    return out


# ---------------------------------------------------------------- tiny tokenizer and data

WORDS = ("the a of to and in is you that it for on with as are this be at have or from what how why when where "
         "can do does will would could should tell me about please explain weather music river city light time "
         "water people world sound voice story day night green blue small large quick slow happy one two three").split()


def sentence(rng, lo=3, hi=12):
    s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))
    return s[0].upper() + s[1:] + rng.choice([".", "?", "!"])


def train_tokenizer(path, vocab_size=320, seed=0):
    """Byte-level BPE with the Qwen2 normaliser / split regex, trained on generated English text."""
    rng = random.Random(seed)
    corpus = [sentence(rng) for _ in range(400)] + ["<SYSTEM>: " + p + "\n " for p in DEFAULT_PROMPT.values()]
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.save(str(path))
    return tok


def make_model_dir(d, *, T=512, A=80, G=3, vocab_size=320, seed=0, **model_kw):
    """A tiny random SLAM-Omni model (slam_omni_ref.make_model) with a trained tokenizer.json."""
    from oracle import slam_omni_ref as ref
    os.makedirs(d, exist_ok=True)
    tok = train_tokenizer(os.path.join(d, "tokenizer.json"), vocab_size, seed)
    assert tok.get_vocab_size() <= T - 64
    model, adapter = ref.make_model(d, T=T, A=A, G=G, seed=seed, **model_kw)
    return model, adapter


def make_records(n, *, A=80, seed=1, speech_wavs=(), text_only=False, learnable=False):
    """n generated records: text questions (and spoken ones when speech_wavs are given). learnable: the answer
    text and audio are a fixed function of the question (so that a model can fit them)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        q = sentence(rng, 3, 8)
        if learnable:
            a = " ".join(reversed(q.rstrip(".?!").lower().split())) + "."
            toks = [(len(w) * 7 + k) % (A - 64) for k, w in enumerate(q.split())] * 2
        else:
            a = sentence(rng, 2, 14)
            toks = [rng.randrange(A - 64) for _ in range(rng.randint(1, 30))]
        rec = {"key": f"s{i}", "source_text": "<USER>: " + q, "target_text": a, "target_token": toks}
        if speech_wavs and not text_only and i % 2:
            rec["source_wav"] = speech_wavs[i % len(speech_wavs)]
        out.append(rec)
    return out


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
