"""The device seam's calls per micro-batch do not depend on how many tokens or rows the micro-batch has
(docs/design.md "Seam calls per step"). OMNISHARD_COUNT_OPS counts every member's calls of a run on the strict
guard backend; the same training run with samples of 64 and of 512 positions (so about eight times the tokens, the
distinct embedding rows fetched and the rows with targets) makes the same number of calls of every member, at
ZeRO-0 and ZeRO-3, text only and with speech inputs. A loop of seam calls over rows or tokens (embedding rows
fetched one at a time, the loss's rows reordered one at a time, the speech splice position by position) makes
them differ.

`python tests/test_seam_counts.py` prints the calls per training step, per decoder layer and per audio head
(the numbers docs/design.md publishes)."""
import json
import sys

import numpy as np
import pytest

from oracle import slam_omni_ref as ref
from omni_run import run
from test_speech_train import write_wav

G, V, A = 3, 128, 64


def write_data(path, n, L, speech=None, seed=3):
    """n pretokenized samples of L positions each (ids and labels random, a -100 prompt); with speech (a wav name),
    every sample has a speech span of 6 positions after a 3-position prompt"""
    g = np.random.default_rng(seed)
    with open(path, "w") as f:
        for _ in range(n):
            ids = [[int(V + x) for x in g.integers(0, A, L)] for _ in range(G)] + [[int(x) for x in g.integers(0, V, L)]]
            lab = [[int(x) for x in g.integers(0, A, L)] for _ in range(G)] + [[int(x) for x in g.integers(0, V, L)]]
            for r in lab:
                r[:4] = [-100] * 4
            rec = {}
            if speech:
                for r in range(G + 1):
                    ids[r][3:9] = [V + A - 63 if r < G else V - 63] * 6   # pad_a / pad_t
                    lab[r][:9] = [-100] * 9
                rec = {"speech_wav": speech, "speech_start": 3}
            f.write(json.dumps({"input_ids": ids, "labels": lab, **rec}) + "\n")


def make(d, layers=1, speech=False):
    ref.make_model(str(d / "model"), hidden=16, layers=layers, heads=2, kv_heads=1, inter=32, T=V, A=A, G=G, seed=0)
    if speech:
        ref.add_projector(str(d / "model"), 16, 24, 16)
        ref.make_encoder(str(d / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
        write_wav(d / "s.wav", 0.6, 500, seed=5)
    for L in (64, 512):
        write_data(d / f"data{L}.jsonl", 4, L, "s.wav" if speech else None)


def counts(d, L, steps, zero=0, speech=False, ranks=1, out="out"):
    """{member: calls} of an sft run of `steps` steps of one micro-batch of 2 samples of L positions"""
    f = d / f"{out}-{L}-{steps}-{zero}.json"
    args = ["sft", "--device", "guard", "--model", d / "model", "--dataset", d / f"data{L}.jsonl",
            "--output_dir", d / f"{out}-{L}-{steps}-{zero}", "--max_steps", steps, "--max_length", L,
            "--per_device_train_batch_size", 2, "--learning_rate", "1e-3", "--save_steps", 1000,
            "--save_strategy", "no", *(["--deepspeed", f"zero{zero}"] if zero else []),
            *(["--speech_encoder", d / "enc"] if speech else [])]
    run(args, np_=ranks if ranks > 1 else None, env={"OMNISHARD_COUNT_OPS": str(f)}, timeout=300)
    c = json.loads(f.read_text())
    assert c["backend"] == "guard"
    return {k: v["calls"] for k, v in c["members"].items()}


def differ(a, b):
    return {k: (a[k], b[k]) for k in a if a[k] != b[k]}


@pytest.mark.parametrize("zero,speech", [(0, False), (3, False), (0, True), (3, True)])
def test_calls_do_not_depend_on_the_tokens(tmp_path, zero, speech):
    make(tmp_path, speech=speech)
    short, long = counts(tmp_path, 64, 2, zero, speech), counts(tmp_path, 512, 2, zero, speech)
    assert short["gemm"] + short["matmul"] > 0 and short["adamw"] > 0, short   # the counts are the run's
    assert not differ(short, long), f"seam calls that depend on the micro-batch's tokens: {differ(short, long)}"


def per_step(d, **kw):
    """the calls of one training step (one micro-batch and the optimizer step): 3 steps less 2"""
    a, b = counts(d, 64, 3, **kw), counts(d, 64, 2, **kw)
    return {k: a[k] - b[k] for k in a if a[k] != b[k]}


def main():
    import pathlib, tempfile
    with tempfile.TemporaryDirectory() as t:
        t = pathlib.Path(t)
        rows = {}
        for layers in (1, 2):
            d = t / f"l{layers}"
            d.mkdir()
            make(d, layers)
            rows[layers] = {z: per_step(d, zero=z, out=f"z{z}") for z in (0, 3)}
        for z in (0, 3):
            one, two = rows[1][z], rows[2][z]
            layer = {k: two.get(k, 0) - one.get(k, 0) for k in set(one) | set(two) if two.get(k, 0) != one.get(k, 0)}
            print(f"ZeRO-{z}: one step of a 1-layer model: {sum(one.values())} calls: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(one.items())))
            print(f"ZeRO-{z}: each further decoder layer: {sum(layer.values())} calls: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(layer.items())))


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    main()
