"""The device seam's calls per micro-batch do not depend on how many tokens or rows the micro-batch has
(docs/design.md "Seam calls per step"). OMNISHARD_COUNT_OPS counts every member's calls of a run on the strict
guard backend; the same training run with samples of 64 and of 512 positions (so about eight times the tokens, the
distinct embedding rows fetched and the rows with targets) makes the same number of calls of every member, at
ZeRO-0 and ZeRO-3, text only and with speech inputs. A loop of seam calls over rows or tokens (embedding rows
fetched one at a time, the loss's rows reordered one at a time, the speech splice position by position) makes
them differ.

Each part of the micro-batch (its forward, its loss head, its backward: the counting wrapper's phases) makes the same
calls at both lengths too. `python tests/test_seam_counts.py` prints the calls of one training step by part, per
decoder layer, of the loss head and per audio layer G (the table docs/design.md publishes)."""
import json
import sys

import numpy as np
import pytest

from oracle import slam_omni_ref as ref
from omni_run import run
from test_speech_train import write_wav

G, V, A = 3, 128, 64


def write_data(path, n, L, speech=None, seed=3, G=G, uneven=False):
    """n pretokenized samples of L positions each (ids and labels random, a -100 prompt); with speech (a wav name),
    every sample has a speech span of 6 positions after a 3-position prompt; uneven: sample i has targets on its
    first L / 2**i positions only (any two samples of a rank have fewer or more rows with targets than another
    rank's: the balanced head moves rows)"""
    g = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(n):
            ids = [[int(V + x) for x in g.integers(0, A, L)] for _ in range(G)] + [[int(x) for x in g.integers(0, V, L)]]
            lab = [[int(x) for x in g.integers(0, A, L)] for _ in range(G)] + [[int(x) for x in g.integers(0, V, L)]]
            for r in lab:
                r[:4] = [-100] * 4
                if uneven:
                    r[max(L >> i, 5):] = [-100] * (L - max(L >> i, 5))
            rec = {}
            if speech:
                for r in range(G + 1):
                    ids[r][3:9] = [V + A - 63 if r < G else V - 63] * 6   # pad_a / pad_t
                    lab[r][:9] = [-100] * 9
                rec = {"speech_wav": speech, "speech_start": 3}
            f.write(json.dumps({"input_ids": ids, "labels": lab, **rec}) + "\n")


def make(d, layers=1, speech=False, G=G):
    ref.make_model(str(d / "model"), hidden=16, layers=layers, heads=2, kv_heads=1, inter=32, T=V, A=A, G=G, seed=0)
    if speech:
        ref.add_projector(str(d / "model"), 16, 24, 16)
        ref.make_encoder(str(d / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
        write_wav(d / "s.wav", 0.6, 500, seed=5)
    for L in (64, 512):
        write_data(d / f"data{L}.jsonl", 4, L, "s.wav" if speech else None, G=G)
    write_data(d / "val.jsonl", 2, 64, seed=4, G=G)


def count_file(d, L, steps, zero=0, speech=False, ranks=1, out="out", extra=(), batch=2, data="data"):
    """the counts JSON (kernels/ops.h os_ops_count_write) of an sft run of `steps` steps of one micro-batch of
    `batch` samples of L positions (extra: more options; out names the run; data the dataset's name); with ranks > 1
    a list, rank by rank"""
    f = d / f"{out}-{L}-{steps}-{zero}-b{batch}.json"
    args = ["sft", "--device", "guard", "--model", d / "model", "--dataset", d / f"{data}{L}.jsonl",
            "--output_dir", d / f"{out}-{L}-{steps}-{zero}-b{batch}", "--max_steps", steps, "--max_length", L,
            "--per_device_train_batch_size", batch, "--learning_rate", "1e-3", "--save_steps", 1000,
            "--save_strategy", "no", *(["--deepspeed", f"zero{zero}"] if zero else []),
            *(["--speech_encoder", d / "enc"] if speech else []), *extra]
    run(args, np_=ranks if ranks > 1 else None, env={"OMNISHARD_COUNT_OPS": str(f)}, timeout=300)
    cs = [json.loads((f if r == 0 else f.with_name(f"{f.name}.{r}")).read_text()) for r in range(ranks)]
    assert all(c["backend"] == "guard" for c in cs)
    return cs if ranks > 1 else cs[0]


def counts(d, L, steps, **kw):
    """{member: calls} of count_file's run"""
    return {k: v["calls"] for k, v in count_file(d, L, steps, **kw)["members"].items()}


def differ(a, b):
    return {k: (a[k], b[k]) for k in a if a[k] != b[k]}


@pytest.mark.parametrize("zero,speech", [(0, False), (3, False), (0, True), (3, True)])
def test_calls_do_not_depend_on_the_tokens(tmp_path, zero, speech):
    make(tmp_path, speech=speech)
    c_short, c_long = count_file(tmp_path, 64, 2, zero, speech), count_file(tmp_path, 512, 2, zero, speech)
    short, long = ({k: v["calls"] for k, v in c["members"].items()} for c in (c_short, c_long))
    assert short["matmul"] > 0 and short["adamw"] > 0, short   # the counts are the run's
    assert not differ(short, long), f"seam calls that depend on the micro-batch's tokens: {differ(short, long)}"
    for c in (c_short, c_long):   # the phases split the calls
        assert {k: sum(p.get(k, 0) for p in c["phases"].values()) for k in short} == \
            {k: v["calls"] for k, v in c["members"].items()}
    for p in ("forward", "loss", "backward"):
        assert c_short["phases"][p] and c_short["phases"][p] == c_long["phases"][p], p


# what still runs clip by clip or sample by sample with speech: the encoder front's two convolutions (conv1d takes
# one input) and the projector (model/speech_input.c: its products, ReLU, its backward's zeroed scratch)
PER_SAMPLE = ("conv1d_fwd", "matmul", "relu_fwd", "relu_grad", "zero")


def increase(a, b):
    """{member: b's calls - a's} over the members whose calls differ"""
    return {k: v[1] - v[0] for k, v in differ(a, b).items()}


@pytest.mark.parametrize("zero,speech", [(0, False), (3, False), (0, True), (3, True)])
def test_calls_do_not_depend_on_the_samples(tmp_path, zero, speech):
    """a micro-batch of 1 sample and one of 2 make the same calls in each part (the embedding's rows of every
    sample, its backward's scatter-add, the speech splice, the loss's rows, the speech encoder's blocks and final
    norm over all clips: one call each over the micro-batch, none per sample). With speech, the members of
    PER_SAMPLE may make more calls with 2 samples, and their increase is the same with an encoder of 3 blocks as with
    one of 2 (it is the projector's and the front's convolutions', none of it the blocks')"""
    make(tmp_path, speech=speech)
    one, two = (count_file(tmp_path, 64, 2, zero, speech, batch=b) for b in (1, 2))
    assert one["phases"]["forward"]["matmul"] > 0, one   # the counts are the run's
    if speech:
        assert one["phases"]["forward"]["gather_rows"] > 0 and one["phases"]["backward"]["gather_rows"] > 0, one
        assert one["phases"]["forward"]["attention_fwd"] > 0 and one["phases"]["forward"]["conv1d_fwd"] > 0, one
    for p in ("forward", "loss", "backward"):
        a, b = ({k: v for k, v in c["phases"][p].items() if not speech or k not in PER_SAMPLE} for c in (one, two))
        assert not differ(a, b), f"{p}: seam calls that depend on the micro-batch's samples: {differ(a, b)}"
    if speech:
        ref.make_encoder(str(tmp_path / "enc3"), d_model=16, layers=3, heads=4, ffn=32, max_pos=30, layout="cond")
        deep = [count_file(tmp_path, 64, 2, zero, batch=b, out="deep", extra=("--speech_encoder", tmp_path / "enc3"))
                for b in (1, 2)]
        assert deep[0]["phases"]["forward"]["attention_fwd"] > one["phases"]["forward"]["attention_fwd"], deep[0]
        for p in ("forward", "backward"):
            got, want = increase(*(c["phases"][p] for c in deep)), increase(one["phases"][p], two["phases"][p])
            assert got == want, f"{p}: the calls a sample adds grow with the encoder's blocks: {got} vs {want}"


def test_balanced_head_calls_do_not_depend_on_the_tokens(tmp_path):
    """2 ranks, --head_balance true, the ranks' rows with targets uneven (rows move at both lengths): each rank makes
    the same calls at T=64 and T=512, in each part; the moved rows go and come back in a fixed number of calls"""
    ref.make_model(str(tmp_path / "model"), hidden=16, layers=1, heads=2, kv_heads=1, inter=32, T=V, A=A, G=G, seed=0)
    for L in (64, 512):
        write_data(tmp_path / f"uneven{L}.jsonl", 4, L, uneven=True)
    hb = ["--head_balance", "true"]
    short, long = (count_file(tmp_path, L, 2, ranks=2, out="hb", extra=hb, data="uneven") for L in (64, 512))
    for L in (64, 512):   # rows moved
        logs = [json.loads(l) for l in open(tmp_path / f"hb-{L}-2-0-b2" / "logging.jsonl")]
        assert sum(l.get("head_rows_moved", 0) for l in logs) > 0, logs
    for r in range(2):
        assert short[r]["phases"]["loss"]["matmul"] > 0, short[r]
        for p in ("forward", "loss", "backward"):
            assert not differ(short[r]["phases"][p], long[r]["phases"][p]), \
                f"rank {r}, {p}: calls that depend on the tokens: {differ(short[r]['phases'][p], long[r]['phases'][p])}"


def test_bf16_calls_are_counted_and_do_not_depend_on_the_tokens(tmp_path):
    """the counting wrapper carries the backend's precision: a bf16 run is counted (it stopped with 'the session asks
    for bf16 products but the guard backend was opened for fp32 ones'), and its calls are independent of T too"""
    make(tmp_path)
    bf16 = ["--torch_dtype", "bfloat16"]
    short, long = (counts(tmp_path, L, 2, out="bf16", extra=bf16) for L in (64, 512))
    assert short["matmul"] > 0 and short["cast"] > 0, short   # bf16: weights and activations rounded by cast
    assert not differ(short, long), f"bf16 seam calls that depend on the micro-batch's tokens: {differ(short, long)}"


def minus(a, b):
    """a - b per member (members absent count 0; zeros left out)"""
    return {k: a.get(k, 0) - b.get(k, 0) for k in set(a) | set(b) if a.get(k, 0) != b.get(k, 0)}


def phases(d, zero):
    """{part: {member: calls}} at T=64 (the counting wrapper's phases, train/step.c): one training step (3 steps less
    2) as its micro-batch's forward, loss and backward and the rest ("other": the optimizer step); and one evaluation
    of one micro-batch (a run with it less one without) as its forward and loss (the head's forward)"""
    ph = lambda c: c["phases"]
    tag = f"z{zero}"
    base = ph(count_file(d, 64, 2, zero, out=tag + "base"))
    step = ph(count_file(d, 64, 3, zero, out=tag + "step"))
    ev = ph(count_file(d, 64, 2, zero, out=tag + "eval", extra=["--val_dataset", d / "val.jsonl", "--eval_steps", 1000]))
    got = {f"train {p}": minus(step[p], base[p]) for p in base}
    got.update({f"eval {p}": minus(ev[p], base[p]) for p in ("forward", "loss")})
    return got


# Seam calls of each further decoder layer per micro-batch, its forward and its backward (with the recomputed
# forward) together, on the guard backend at any T: at most these (a fusion undone or a per-layer call added breaks
# them). The target for a GPU (docs/performance.md) is 40.
LAYER_CALLS_MAX = {0: 43, 3: 54}


def layer_calls(d, zero):
    """{member: calls} of one more decoder layer's forward and backward in one micro-batch: a 2-layer model's step
    less a 1-layer one's (each step 3 steps less 2, as phases())"""
    per = {}
    for layers in (1, 2):
        m = d / f"l{layers}"
        m.mkdir()
        make(m, layers)
        base, step = (count_file(m, 64, s, zero, out=f"z{zero}")["phases"] for s in (2, 3))
        fb = [minus(step[p], base[p]) for p in ("forward", "backward")]
        per[layers] = {k: sum(x.get(k, 0) for x in fb) for k in set().union(*fb)}
    return {k: v for k, v in minus(per[2], per[1]).items() if v}


@pytest.mark.parametrize("zero", [0, 3])
def test_calls_per_decoder_layer_within_budget(tmp_path, zero):
    got = layer_calls(tmp_path, zero)
    assert got.get("matmul", 0) > 0, got   # the counts are a layer's
    assert sum(got.values()) <= LAYER_CALLS_MAX[zero], \
        f"a decoder layer makes {cell(got)} seam calls per micro-batch at ZeRO-{zero} (at most {LAYER_CALLS_MAX[zero]})"


def cell(c):
    return f"**{sum(c.values())}**: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) if c else "0"


def main():
    """the seam's calls per training step as a markdown table (docs/design.md "Seam calls per step"), at ZeRO-0 and
    ZeRO-3, T=64 (the same at any T: test_calls_do_not_depend_on_the_tokens): one step of a 1-layer model by part,
    what each further decoder layer adds (2 layers less 1), the loss head's forward (evaluation) and backward
    (training less evaluation), and what each further audio layer G adds (3 less 2)"""
    import pathlib, tempfile
    with tempfile.TemporaryDirectory() as t:
        t = pathlib.Path(t)
        got = {}
        for name, layers, g in (("l1", 1, G), ("l2", 2, G), ("g2", 1, G - 1)):
            d = t / name
            d.mkdir()
            make(d, layers, G=g)
            for z in (0, 3):
                got[name, z] = phases(d, z)
        rows = []
        for z in (0, 3):
            one, two, g2 = got["l1", z], got["l2", z], got["g2", z]
            rows.append({
                "one training step, 1 decoder layer: forward": one["train forward"],
                "... the loss head (forward and backward, fused)": one["train loss"],
                "... backward": one["train backward"],
                "... the rest (the optimizer step)": one["train other"],
                "each further decoder layer: forward": minus(two["train forward"], one["train forward"]),
                "each further decoder layer: backward (with its recomputed forward)":
                    minus(two["train backward"], one["train backward"]),
                "each further decoder layer: the optimizer step": minus(two["train other"], one["train other"]),
                "the loss head: forward (evaluation)": one["eval loss"],
                # (at ZeRO-3 the memory members differ by more: evaluation opens no gradient scopes)
                "the loss head: backward (training less evaluation)": minus(one["train loss"], one["eval loss"]),
                **{f"each further audio layer (G): {p}": minus(one[f"train {k}"], g2[f"train {k}"])
                   for p, k in (("forward", "forward"), ("loss head", "loss"), ("backward", "backward"))},
            })
        print("| part | ZeRO-0 | ZeRO-3 |")
        print("|---|---|---|")
        for part in rows[0]:
            print(f"| {part} | {cell(rows[0][part])} | {cell(rows[1][part])} |")


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    main()
