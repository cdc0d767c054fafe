"""Python port of the SLAM-Omni sample rules (../shared/docs/slam-omni.md "One training sample", and the
schema / truncation policy of docs/dataset.md), written independently of the C code, with Hugging Face
`tokenizers` for the text ids. omnishard's samples (src/data/slam_*.c) must equal these.

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
    """The record's parts by the schema of docs/dataset.md; None when the answer is empty (skipped)."""
    task = rec.get("task_type", "s2s")
    wav = rec.get("source_wav", rec.get("question_audio"))
    if isinstance(wav, dict):
        wav = wav["path"]
    src = rec.get("source_text", rec.get("question"))
    target = rec.get("target_text", rec.get("answer"))
    tokens = rec.get("target_token", rec.get("answer_cosyvoice_speech_token"))
    history, question = rec.get("history") or "", None
    if src is not None:
        k = src.rfind("<USER>:")
        history += src[:k] if k >= 0 else ""
        question = (src[k + 7:] if k >= 0 else src).lstrip(" ")
    if task == "tts":
        wav = None
    answer = target if target is not None else (question if task == "asr" else None)
    if answer is None or not answer.strip(" \t\r\n"):
        return None
    if task != "asr" and not tokens:
        return None
    system = rec.get("system_prompt") or DEFAULT_PROMPT[task]
    return dict(task=task, wav=wav, question=question, history=history, answer=answer,
                tokens=list(tokens or []) if task != "asr" else [], system=system)


# ---------------------------------------------------------------- one sample

def build(f, V, enc, max_length, truncation, T_s=T_S):
    """dict(ids, labels, lead, speech) ([G+1][L] lists, speech [L] or None), or None when skipped."""
    G, T = V.G, V.T
    sysp = f"<SYSTEM>: {f['system']}\n "
    prompt = enc(sysp + f["history"])
    speech = f["wav"] is not None
    question = [] if speech else enc(f["answer"] if f["task"] == "tts" else f["question"])
    answer = enc(f["answer"])
    Q = T_s if speech else len(question)
    S = Q + 3
    asr = f["task"] == "asr"
    if asr:
        layers, Ta = [[] for _ in range(G)], 0
    else:   # group layout: tokens + [eoa], filled with pad_a to a multiple of G, layer j = seq[j::G]
        seq = f["tokens"] + [V.eoa]
        seq += [V.pad_a] * (-len(seq) % G)
        layers, Ta = [seq[j::G] for j in range(G)], len(seq) // G
    La = max(len(answer) + 1, Ta)
    keep = La
    if 2 + len(prompt) + S + La > max_length:
        if truncation == "delete":
            return None
        sys_ids, hist_ids = enc(sysp), enc(f["history"])
        room = max_length - (2 + len(sys_ids) + S)
        kh = min(max(room - La, 0), len(hist_ids))
        prompt = sys_ids + (hist_ids[len(hist_ids) - kh:] if kh else [])
        if room < 1:
            return None
        keep = min(room, La)
    P = 2 + len(prompt)
    ids, labels = [], []
    for j in range(G):
        row = [V.pad_a] * P + [V.input_a] + [V.pad_a] * Q + [V.eoa, V.pad_a if asr else V.answer_a]
        ans = [layers[j][q] if q < Ta else V.pad_a for q in range(La)]
        ids.append([T + x for x in row + ans][:P + S + keep])
        labels.append(([-100] * (P + S) + [layers[j][q] if q < Ta else -100 for q in range(La)])[:P + S + keep])
    text_in = [V.input_t] + prompt + [V.eot] + [V.input_t] + ([V.pad_t] * Q if speech else question) + \
              [V.eot, V.asr if asr else V.answer_t]
    text_ans = answer + [V.eot] + [V.pad_t] * (La - len(answer) - 1)
    ids.append((text_in + text_ans)[:P + S + keep])
    labels.append(([-100] * (P + S) + answer + [V.eot] + [-100] * (La - len(answer) - 1))[:P + S + keep])
    sp = [0] * (P + S + keep)
    if speech:
        sp[P + 1:P + 1 + T_s] = [1] * T_s
    return dict(ids=ids, labels=labels, lead=P + S, speech=sp if speech else None)


def load(path, tokenizer_json, T, A, G, max_length, truncation="right", T_s=T_S):
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
        s = build(f, V, enc, max_length, truncation, T_s)
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
