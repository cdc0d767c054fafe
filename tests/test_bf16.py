"""bf16 mixed precision (--torch_dtype bfloat16, docs/training.md "bf16 mixed precision") against the PyTorch oracle.

The oracle (tests/oracle/slam_omni_ref.py) trains in two bf16 modes: "inputs" is omnishard's definition (every
matrix product forward and backward on bf16-rounded inputs, fp32 accumulation and results), "autocast" is how
PyTorch trains in mixed precision (torch.autocast: bf16 outputs of the linears too). Tolerances (documented in
docs/training.md): the sgemm path (rounded values in OpenBLAS sgemm) sums like PyTorch's fp32 matmul and matches
"inputs" as tightly as fp32 matches fp32; the oneDNN path sums bf16 pairs in another order, and in bf16 a last-bit
difference of an fp32 result flips the rounding of the next product's input, so it matches within bf16 class
bounds; "autocast" differs from both by its bf16 outputs.
"""
import functools
import os
import subprocess
import pytest

from conftest import BIN
from oracle import slam_omni_ref as ref
from omni_run import sft, logs, weights, rel

STEPS = 3
# head dim 16: the attention scale 1/4 is a power of two, so scaling before or after rounding is the same
MODEL = dict(hidden=64, layers=2, heads=4, kv_heads=2, inter=96, T=192, A=80, G=3, tied=True)
ARGS = ["--torch_dtype", "bfloat16", "--learning_rate", "1e-3", "--per_device_train_batch_size", "2", "--max_length", "16",
        "--lr_scheduler_type", "constant", "--weight_decay", "0.01"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("bf16")
    ref.make_model(str(d / "model"), **MODEL)
    ref.make_data(str(d / "data.jsonl"), 7, G=3, T=192, A=80)
    return d


def oracle(d, kind, cache={}):
    if kind not in cache:
        model, adapter = ref.make_model(str(d / f"ref_{kind}"), **MODEL)
        cache[kind] = ref.train(model, adapter, ref.load_data(str(d / "data.jsonl"), 16), G=3, T=192, A=80,
                                steps=STEPS, lr=1e-3, batch=2, sched="constant", wd=0.01, bf16=kind)
    return cache[kind]


def omnishard(d, name, path, extra=(), np_=None, args=ARGS, env_add=None):
    """d/model trained on d/data.jsonl with args + extra (OMNISHARD_BF16_GEMM=path unless None, env_add set too):
    the process, its log, the step-1 gradients and the final weights"""
    out = d / name
    env = {k: v for k, v in os.environ.items() if k != "OMNISHARD_BF16_GEMM"}
    if path:
        env["OMNISHARD_BF16_GEMM"] = path
    env.update(env_add or {})
    old = os.environ.copy()
    os.environ.clear(), os.environ.update(env)
    try:
        p = sft(d / "model", d / "data.jsonl", out, STEPS, [*args, "--dump_grads", str(d / f"{name}.grads"), *extra],
                np_=np_)
    finally:
        os.environ.clear(), os.environ.update(old)
    from safetensors.numpy import load_file
    return p, logs(out), load_file(str(d / f"{name}.grads")), weights(out / "final_model")


def compare(run, orc):
    (_, cl, cg, cw), (rl, rg, rw) = run, orc
    loss = max(abs(c["loss"] - r["loss"]) / abs(r["loss"]) for c, r in zip(cl, rl))
    grads = max(rel(cg[k], rg[k].numpy()) for k in rg)
    w = max(rel(cw[k], rw[k].numpy()) for k in rw)
    return loss, grads, w


def has_bf16_cpu():
    flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "")
    return " avx512_bf16" in flags or " amx_bf16" in flags


@pytest.mark.parametrize("path", ["sgemm", "onednn", "onednn_gemm", "onednn_matmul"])
def test_gemm_definition(path):
    """the kernel-level unit test (tests/unit/test_gemm_bf16.c) on each path and each of oneDNN's two kernels"""
    exe = BIN.parent / "tests" / "test_gemm_bf16"
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, env=dict(os.environ, OMNISHARD_BF16_GEMM=path))
    for why in ("no working dnnl_gemm_bf16bf16f32", "no bf16 matmul on this CPU"):   # refused, as documented
        if path.startswith("onednn") and f"={path}: " in p.stderr and why in p.stderr and not has_bf16_cpu():
            pytest.skip(f"this CPU has no AVX512-BF16 or AMX, so the bf16 GEMM path {path} cannot run here, and omnishard refuses it as documented: {p.stderr.strip()}")
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"bf16 GEMM path: {path.split('_')[0]}" in p.stdout, p.stdout
    kernel = {"onednn_gemm": "gemm_bf16bf16f32", "onednn_matmul": "matmul"}.get(path)
    if kernel:
        assert "oneDNN" in p.stdout and kernel in p.stdout.split("path:")[1].split("\n")[0], p.stdout


@pytest.mark.parametrize("path", ["sgemm", "onednn", "onednn_gemm"])
def test_rows_independent_of_the_rows_beside_them(path):
    """tests/unit/test_gemm_rows.c on each path a run can take by default (onednn_matmul, forced for comparisons, is
    the documented exception): a row of a product has the bits of the row computed alone"""
    exe = BIN.parent / "tests" / "test_gemm_rows"
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OMNISHARD_BF16_GEMM=path))
    if path.startswith("onednn") and p.returncode and f"={path}: " in p.stderr and not has_bf16_cpu():
        pytest.skip(f"this machine cannot run {path}; the run refused it: {p.stderr.strip()}")
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"bf16 GEMM path: {path.split('_')[0]}" in p.stdout and "bf16: skipped" not in p.stdout, p.stdout


def test_sgemm_path_is_the_definition(setup):
    run = omnishard(setup, "sgemm", "sgemm")
    assert "bf16 mixed precision" in run[0].stderr and "OpenBLAS sgemm on bf16-rounded fp32" in run[0].stderr, run[0].stderr
    loss, grads, w = compare(run, oracle(setup, "inputs"))
    assert loss <= 1e-6 and grads <= 1e-4 and w <= 1e-4, (loss, grads, w)
    # and it is not fp32: the rounding moved the gradients far beyond fp32's agreement
    loss32, grads32, w32 = compare(run, oracle(setup, None))
    assert grads32 >= 1e-3, grads32


def test_default_path_vs_pytorch(setup):
    run = omnishard(setup, "default", None)
    stderr = run[0].stderr
    if has_bf16_cpu():
        assert "oneDNN" in stderr and "bf16" in stderr.split("oneDNN")[1].split(")")[0], stderr
    loss, grads, w = compare(run, oracle(setup, "inputs"))
    assert loss <= 1e-4 and grads <= 2e-2 and w <= 2e-2, (loss, grads, w)
    loss, grads, w = compare(run, oracle(setup, "autocast"))   # PyTorch's mixed precision: the documented bf16 bound
    assert loss <= 1e-3 and w <= 5e-2, (loss, grads, w)


@functools.lru_cache(maxsize=None)
def accum2(setup):
    """1 rank x 2 micro-batches of 2: trained once, compared with every stage's 2-rank run (its output directory is
    written once: a second run into it would be refused as a used output directory)"""
    return omnishard(setup, "accum2", None, ["--gradient_accumulation_steps", "2"])


@pytest.mark.parametrize("stage", [0, 3])
def test_n_ranks_equal_accumulation(setup, stage):
    """2 ranks x batch 2 == 1 rank x 2 micro-batches of 2, in bf16 (docs/training.md: the bound)"""
    one = accum2(setup)
    two = omnishard(setup, f"np2s{stage}", None, ["--zero_stage", stage], np_=2)
    assert sum(x["head_rows_moved"] for x in two[1]) > 0   # rows moved between the ranks (docs/training.md)
    for x, y in zip(two[1], one[1]):
        assert abs(x["loss"] - y["loss"]) <= 1e-6 * abs(y["loss"]), (x, y)
    for k in one[3]:
        assert rel(two[3][k], one[3][k]) <= 1e-5, (k, rel(two[3][k], one[3][k]))


def zero3_run(d, name, bf16, cache={}, path=None):
    """2 ranks at ZeRO-3 (ZeRO-2 for name ending in 's2'), bf16 (on the GEMM path `path`, None: the CPU's) or fp32;
    cached per name"""
    if name not in cache:
        stage = 2 if name.endswith("s2") else 3
        if bf16:
            cache[name] = omnishard(d, name, path, ["--zero_stage", stage], np_=2)
        else:
            out = d / name
            args = [a for a in ARGS if a not in ("--torch_dtype", "bfloat16")]
            p = sft(d / "model", d / "data.jsonl", out, STEPS, [*args, "--zero_stage", stage], np_=2)
            cache[name] = (p, logs(out), None, weights(out / "final_model"))
    return cache[name]


@pytest.mark.parametrize("path", [None, "sgemm"])
def test_zero3_bf16_gather_is_exact(setup, path):
    """ZeRO-3 gathers the matrices in bf16, each rank rounding its slice (docs/zero.md "bf16"); ZeRO-2 rounds its full
    fp32 copy once per step. Rounding is elementwise, so both hand the products the same values: the runs agree
    bitwise (losses, gradients, fp32 master weights after 3 steps). On the sgemm path the gathered bf16 bits are
    widened to fp32 in place."""
    p = path or "cpu"
    s2, s3 = zero3_run(setup, f"g2{p}s2", True, path=path), zero3_run(setup, f"g2{p}s3", True, path=path)
    assert [x["loss"] for x in s3[1]] == [x["loss"] for x in s2[1]], (s3[1], s2[1])
    for k in s2[2]:
        assert (s3[2][k] == s2[2][k]).all(), ("gradient", k)
    for k in s2[3]:
        assert (s3[3][k] == s2[3][k]).all(), ("weight", k)


def test_zero3_bf16_halves_gather_bytes(setup):
    """the bytes a rank receives by parameter all-gathers per step (logging.jsonl gather_bytes): bf16 moves the
    matrices at 2 bytes per element, the rest (norms, biases: ~1% here) at 4; fp32 moves everything at 4"""
    bf, fp = zero3_run(setup, "g2cpus3", True), zero3_run(setup, "f2s3", False)
    for x, y in zip(bf[1], fp[1]):
        assert y["gather_bytes"] > 0
        assert 0.5 <= x["gather_bytes"] / y["gather_bytes"] <= 0.52, (x["gather_bytes"], y["gather_bytes"])


def test_zero3_bf16_exact_gather_of_a_bf16_bucket(setup):
    """--param_loss reads fp32 values (zr_gather) of buckets the forward gathered in bf16 (a layer, the tied
    embedding/head): ZeRO-3 completes them with an fp32 all-gather; the result stays ZeRO-2's bitwise"""
    terms = ["--param_loss", "l2:1e-2:model.layers.0.", "--param_loss", "l2:1e-2:model.embed_tokens"]
    s2 = omnishard(setup, "pl2s2", None, ["--zero_stage", 2, *terms], np_=2)
    s3 = omnishard(setup, "pl2s3", None, ["--zero_stage", 3, *terms], np_=2)
    assert [(x["loss"], x["param_loss"]) for x in s3[1]] == [(x["loss"], x["param_loss"]) for x in s2[1]]
    for k in s2[3]:
        assert (s3[3][k] == s2[3][k]).all(), ("weight", k)


@pytest.fixture(scope="module")
def long_rows(tmp_path_factory):
    """samples of 300 positions, batch 2: 600 rows per micro-batch; no prompt region, so that 596 rows of each
    micro-batch have a text and an audio target (one class of rows, src/model/loss.c), 2 an audio target only"""
    d = tmp_path_factory.mktemp("bf16_rows")
    ref.make_model(str(d / "model"), **MODEL)
    ref.make_data(str(d / "data.jsonl"), 2 * STEPS, G=3, T=192, A=80, min_len=300, max_len=300, ignore_prompt=False)
    return d


def rows_run(d, path, rows, cache={}):
    """omnishard on the 600-row micro-batches with OMNISHARD_LOGITS_ROWS=rows; path: a bf16 GEMM path (None: the
    CPU's) or "fp32"; cached"""
    key = (path, rows)
    if key not in cache:
        bf16 = path != "fp32"
        args = [a for a in ARGS if bf16 or a not in ("--torch_dtype", "bfloat16")]
        args[args.index("--max_length") + 1] = "300"
        cache[key] = omnishard(d, f"rows_{path}_{rows}", path if bf16 else None, args=args,
                               env_add={"OMNISHARD_LOGITS_ROWS": str(rows)})
    return cache[key]


@pytest.mark.parametrize("path", ["sgemm", "onednn", "fp32"])
def test_head_chunks_and_stash(long_rows, path):
    """OMNISHARD_LOGITS_ROWS=128 cuts the 596 rows with text and audio targets into 5 equal logits chunks (120 +
    4 x 119), the 2 audio-only rows are a chunk of their own (their audio columns only). In bf16 the head keeps the
    chunks' rounded gradients in its stash (src/model/loss.h: 512 rows, 4 chunks of 128) and computes the weight
    gradients once per stash and at the end of a class of rows: here after the 4th chunk, the 5th and the 6th.
    - Against one chunk per class (596 rows and 2; one stash each): the step-1 loss is the same and the gradients
      below the head are the same products of the same rounded rows; the head's own (lm_head = the tied embedding,
      the adapter) are sums over the same 598 rows grouped differently (fp32 accumulation order only).
    - Against the oracle, which computes all rows at once: fp32 as tightly as fp32 agrees; bf16 within the oneDNN
      class bound. At 300 positions the sgemm path is no longer within the 16-position runs' tight bound (above) on
      either build, chunked or not: the attention products sum 300 terms in OpenBLAS's order, not PyTorch's, and
      a last-bit difference flips the rounding of the next product's input (docs/training.md)."""
    d = long_rows
    run = rows_run(d, path, 128)
    model, adapter = ref.make_model(str(d / f"ref_{path}"), **MODEL)
    orc = ref.train(model, adapter, ref.load_data(str(d / "data.jsonl"), 300), G=3, T=192, A=80, steps=STEPS, lr=1e-3,
                    batch=2, sched="constant", wd=0.01, bf16=None if path == "fp32" else "inputs")
    loss, grads, w = compare(run, orc)
    if path == "fp32":
        assert loss <= 1e-6 and grads <= 1e-4 and w <= 1e-4, (loss, grads, w)
    else:
        assert loss <= 1e-4 and grads <= 2e-2 and w <= 2e-2, (loss, grads, w)
    one = rows_run(d, path, 1000)
    assert abs(run[1][0]["loss"] - one[1][0]["loss"]) <= 1e-7 * abs(one[1][0]["loss"]), (run[1][0], one[1][0])
    for k in one[2]:
        assert rel(run[2][k], one[2][k]) <= 1e-6, (k, rel(run[2][k], one[2][k]))   # measured: head 1.2e-7, the rest 0
    # the chunks did happen: the tied head's gradient sums its rows in other groups
    assert rel(run[2]["model.embed_tokens.weight"], one[2]["model.embed_tokens.weight"]) > 0


def test_gemm_times_table(setup):
    """OMNISHARD_GEMM_TIMES=1 prints the products per shape at exit (src/kernels/gemm_times.c): here the head's
    (rows N = 2 x 16, V = 192 + 80, C = 64) with the operand kinds of the bf16 stash, of hn's rows rounded once as the
    loss starts (lm_head trains: its two products read them) and of lm_head's bf16 copy (the runtime's, read as bf16
    data: rounded ahead), and the narrower products of the rows with audio targets only; another value is named"""
    import re
    env = dict(os.environ, OMNISHARD_GEMM_TIMES="1", OMNISHARD_BF16_GEMM="sgemm")
    def args(out):
        return [str(BIN), "sft", "--model", str(setup / "model"), "--dataset", str(setup / "data.jsonl"),
                "--output_dir", str(setup / out), "--max_steps", "1", *ARGS]
    p = subprocess.run(args("times"), capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    rows = [(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)), m.group(6))
            for m in re.finditer(r"^  (\w\w)\s+(\d+) x (\d+) x (\d+)\s+(\d+)\s+[\d.]+\s+[\d.]+%\s+[\d.]+  (.*)$",
                                 p.stderr, re.M)]

    def kinds(op, shape):   # the operand kinds of the products op with M x N x K matching shape (None: any)
        return {r[5] for r in rows if r[0] == op and all(x is None or x == y for x, y in zip(shape, r[1:4]))}
    assert kinds("NT", (None, 272, 64)) == {"bf16 a, b rounded"}, p.stderr   # logits = hn W^T, hn and W rounded ahead
    assert kinds("NN", (None, 64, 272)) == {"bf16 a, b rounded"}, p.stderr   # dhn from the stash and W
    assert kinds("TN", (272, 64, None)) == {"bf16 a, b rounded"}, p.stderr   # lm_head's dW from the stash and hn
    assert kinds("TN", (240, 80, None)) == {"bf16 a, b rounded"}, p.stderr   # the adapter's dWa
    # SwiGLU's backward outputs dgate/dup [N, F = 96] are rounded once into bf16 stores (src/model/layer.c), and so
    # is the MLP norm's output ln2 [N, C = 64]: the gate/up weight and input gradients read both operands rounded
    assert kinds("TN", (96, 64, None)) == {"bf16 a, b rounded"}, p.stderr   # dW_gate/up = dgate^T ln2
    assert kinds("NN", (None, 64, 96)) == {"bf16 a, b rounded"}, p.stderr   # dln = dgate W_gate
    # the rows with an audio target only (2 of the 22 with a target here; src/model/loss.c, row classes): their
    # logits are the 80 audio columns, and so are their dhn and lm_head dW products
    assert kinds("NT", (2, 80, 64)) == {"bf16 a, b rounded"} and kinds("NN", (2, 64, 80)) == {"bf16 a, b rounded"}, p.stderr
    assert kinds("TN", (80, 64, 2)) == {"bf16 a, b rounded"} and kinds("NT", (20, 272, 64)) == {"bf16 a, b rounded"}, p.stderr
    assert rows and all(r[4] > 0 for r in rows)
    env["OMNISHARD_GEMM_TIMES"] = "yes"
    p = subprocess.run(args("times2"), capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and "OMNISHARD_GEMM_TIMES: expected 1 or 0, got 'yes'" in p.stderr, p.stderr
