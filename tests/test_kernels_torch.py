"""Forward and backward of every kernel in src/kernels against PyTorch (the oracle), on random inputs.

The kernels run in $(BUILD)/tests/test_kernels_io, which reads raw inputs and a spec.txt from a directory and
writes its outputs there (see tests/unit/test_kernels_io.c). Errors are norm-wise relative:
||ours - torch|| / ||torch|| <= 1e-5 for forwards, 1e-4 for gradients.
"""
import os
import pathlib
import subprocess

import numpy as np
import pytest
import torch
import torch.nn.functional as F

ROOT = pathlib.Path(__file__).resolve().parent.parent
IO = ROOT / os.environ.get("OMNISHARD_BUILD", "build") / "tests" / "test_kernels_io"
FWD, BWD = 1e-5, 1e-4


def run(tmp_path, kernel, params, inputs, outputs):
    """inputs: name -> array (float32 / int32 / uint8 / torch tensor); outputs: name -> (shape, dtype)."""
    assert IO.exists(), f"{IO} missing: build it with make BUILD=..."
    spec = [f"kernel {kernel}"] + [f"{k} {v!r}" for k, v in params.items()]
    (tmp_path / "spec.txt").write_text("\n".join(spec) + "\n")
    for name, arr in inputs.items():
        if isinstance(arr, torch.Tensor):
            arr = arr.detach().numpy()
        np.ascontiguousarray(arr).tofile(tmp_path / f"{name}.bin")
    r = subprocess.run([str(IO), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    res = {}
    for name, (shape, dtype) in outputs.items():
        a = np.fromfile(tmp_path / f"o_{name}.bin", dtype=dtype)
        res[name] = torch.from_numpy(a.reshape(shape))
    return res


def close(name, got, want, tol):
    want = want.detach().to(torch.float64)
    got = got.to(torch.float64)
    assert got.shape == want.shape, f"{name}: shape {tuple(got.shape)} vs {tuple(want.shape)}"
    assert torch.isfinite(got).all(), f"{name}: non-finite values"
    err = (got - want).norm().item() / max(want.norm().item(), 1e-30)
    assert err <= tol, f"{name}: relative error {err:.2e} > {tol:.0e}"


def rand(*shape, lo=-1.0, hi=1.0):
    return torch.rand(*shape, dtype=torch.float32) * (hi - lo) + lo


def grads(out, inputs, dout):
    return torch.autograd.grad(out, inputs, grad_outputs=dout)


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_gemm(tmp_path, ta, tb):
    torch.manual_seed(1)
    M, N, K, ld = 7, 5, 9, 11
    a, b, c = rand(11, ld), rand(11, ld), rand(M, ld)
    opa = a[:K, :M].T if ta else a[:M, :K]
    opb = b[:N, :K].T if tb else b[:K, :N]
    want = c.clone()
    want[:, :N] = 0.5 * (opa @ opb) - 1.5 * c[:, :N]
    arows, brows = (K if ta else M), (N if tb else K)
    res = run(tmp_path, "gemm", dict(ta=ta, tb=tb, M=M, N=N, K=K, lda=ld, ldb=ld, ldc=ld, alpha=0.5, beta=-1.5),
              dict(a=a[:arows], b=b[:brows], c=c), dict(c=((M, ld), np.float32)))
    close("c", res["c"], want, FWD)


@pytest.mark.parametrize("bias", [True, False])
def test_linear(tmp_path, bias):
    torch.manual_seed(2)
    N, I, O = 13, 17, 11
    x, w, b, dout = rand(N, I).requires_grad_(), rand(O, I).requires_grad_(), rand(O).requires_grad_(), rand(N, O)
    y = F.linear(x, w, b if bias else None)
    ins = [x, w] + ([b] if bias else [])
    g = grads(y, ins, dout)
    inputs = dict(inp=x, w=w, dout=dout) | (dict(bias=b) if bias else {})
    outs = dict(out=((N, O), np.float32), dinp=((N, I), np.float32), dw=((O, I), np.float32))
    res = run(tmp_path, "linear", dict(N=N, I=I, O=O), inputs, outs | (dict(dbias=((O,), np.float32)) if bias else {}))
    close("out", res["out"], y, FWD)
    close("dinp", res["dinp"], g[0], BWD)
    close("dw", res["dw"], g[1], BWD)
    if bias:
        close("dbias", res["dbias"], g[2], BWD)


def test_embedding(tmp_path):
    """ids [B, R, L]: the R rows' embeddings summed, scale 1/R (SLAM-Omni's mean of its G+1 rows; ids repeat within
    and across the rows), and the table's gradient"""
    torch.manual_seed(3)
    B, R, L, C, V = 2, 4, 6, 8, 5
    scale = 1 / R
    ids = torch.randint(0, V, (B, R, L), dtype=torch.int32)
    table, dout = rand(V, C).requires_grad_(), rand(B * L, C)
    y = (F.embedding(ids.long(), table) * scale).sum(1).reshape(B * L, C)
    (g,) = grads(y, [table], dout)
    res = run(tmp_path, "embedding", dict(B=B, R=R, L=L, C=C, V=V, scale=scale), dict(ids=ids, table=table, dout=dout),
              dict(out=((B * L, C), np.float32), dtable=((V, C), np.float32)))
    close("out", res["out"], y, FWD)
    close("dtable", res["dtable"], g, BWD)


def test_rmsnorm(tmp_path):
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm
    torch.manual_seed(4)
    N, C, eps = 10, 64, 1e-6
    norm = Qwen2RMSNorm(C, eps=eps)
    with torch.no_grad():
        norm.weight.copy_(rand(C, lo=0.5, hi=1.5))
    x, dout = rand(N, C, lo=-3, hi=3).requires_grad_(), rand(N, C)
    y = norm(x)
    g = grads(y, [x, norm.weight], dout)
    res = run(tmp_path, "rmsnorm", dict(N=N, C=C, eps=eps), dict(inp=x, w=norm.weight, dout=dout),
              dict(out=((N, C), np.float32), rstd=((N,), np.float32), dinp=((N, C), np.float32),
                   dw=((C,), np.float32)))
    close("out", res["out"], y, FWD)
    close("rstd", res["rstd"], torch.rsqrt(x.pow(2).mean(-1) + eps), FWD)
    close("dinp", res["dinp"], g[0], BWD)
    close("dw", res["dw"], g[1], BWD)


def test_layernorm(tmp_path):
    torch.manual_seed(5)
    N, C, eps = 10, 48, 1e-5
    x = (rand(N, C, lo=-2, hi=2) + 3.0).requires_grad_()   # a mean far from 0
    w, b, dout = rand(C, lo=0.5, hi=1.5).requires_grad_(), rand(C).requires_grad_(), rand(N, C)
    y = F.layer_norm(x, (C,), w, b, eps)
    g = grads(y, [x, w, b], dout)
    res = run(tmp_path, "layernorm", dict(N=N, C=C, eps=eps), dict(inp=x, w=w, b=b, dout=dout),
              dict(out=((N, C), np.float32), mean=((N,), np.float32), rstd=((N,), np.float32),
                   dinp=((N, C), np.float32), dw=((C,), np.float32), db=((C,), np.float32)))
    close("out", res["out"], y, FWD)
    close("mean", res["mean"], x.mean(-1), FWD)
    close("rstd", res["rstd"], torch.rsqrt(x.var(-1, unbiased=False) + eps), FWD)
    close("dinp", res["dinp"], g[0], BWD)
    close("dw", res["dw"], g[1], BWD)
    close("db", res["db"], g[2], BWD)


def test_rope(tmp_path):
    from transformers import Qwen2Config
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding, apply_rotary_pos_emb
    torch.manual_seed(6)
    B, T, H, D, theta = 2, 6, 3, 16, 1000000.0
    cfg = Qwen2Config(hidden_size=H * D, num_attention_heads=H, num_key_value_heads=H, rope_theta=theta)
    pos = torch.tensor([0, 1, 2, 77, 4095, 32767], dtype=torch.int32)   # large angles: float32 rounding matters
    cos, sin = Qwen2RotaryEmbedding(cfg)(torch.zeros(1, T, H * D), pos[None].long())
    x, dout = rand(B, T, H, D).requires_grad_(), rand(B, T, H, D)
    xh = x.transpose(1, 2)   # HF layout [B, H, T, D]
    yh, _ = apply_rotary_pos_emb(xh, xh, cos, sin)
    y = yh.transpose(1, 2)
    (g,) = grads(y, [x], dout)
    res = run(tmp_path, "rope", dict(B=B, T=T, H=H, D=D, theta=theta), dict(pos=pos, x=x, dout=dout),
              dict(cos=((T, D // 2), np.float32), sin=((T, D // 2), np.float32), out=((B, T, H, D), np.float32),
                   dx=((B, T, H, D), np.float32)))
    # the table must be HF's float32 values (a double-precision angle differs by ~1e-3 at position 32767)
    assert (res["cos"] - cos[0, :, : D // 2]).abs().max().item() <= 1e-6
    assert (res["sin"] - sin[0, :, : D // 2]).abs().max().item() <= 1e-6
    assert torch.equal(cos[0, :, : D // 2], cos[0, :, D // 2:])   # HF repeats the half table
    close("out", res["out"], y, FWD)
    close("dx", res["dx"], g, BWD)


# T=300 spans three blocks of query rows (the kernel skips keys a block cannot see); 3 threads with B*KH=2 kv groups
# take the path where the products, not the groups, are split over threads
@pytest.mark.parametrize("causal,masked,H,KH,T,threads", [(1, 1, 4, 2, 7, None), (0, 0, 2, 2, 7, None),
                         (1, 0, 6, 1, 7, None), (0, 1, 4, 1, 7, None), (1, 1, 4, 2, 300, None),
                         (0, 1, 4, 1, 300, None), (1, 0, 6, 1, 300, "3"), (1, 1, 4, 1, 300, "3")])
def test_attention(tmp_path, monkeypatch, causal, masked, H, KH, T, threads):
    torch.manual_seed(7)
    B, D = 2, 8
    if threads:
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
    q, k, v = rand(B, T, H, D, lo=-2, hi=2), rand(B, T, KH, D, lo=-2, hi=2), rand(B, T, KH, D)
    for t in (q, k, v):
        t.requires_grad_()
    dout = rand(B, T, H, D)
    lengths = [T, 4 if T < 10 else 170]   # right padding: key 0 is real, so no query row is fully masked
    keymask = torch.tensor([[1 if s < n else 0 for s in range(T)] for n in lengths], dtype=torch.uint8)
    allow = torch.ones(B, 1, T, T, dtype=torch.bool)
    if masked:
        allow &= keymask.bool()[:, None, None, :]
    if causal:
        allow &= torch.ones(T, T, dtype=torch.bool).tril()
    qh = q.transpose(1, 2)
    kh = k.transpose(1, 2).repeat_interleave(H // KH, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(H // KH, dim=1)
    y = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=allow).transpose(1, 2)
    att = torch.softmax((qh @ kh.transpose(-1, -2) / D**0.5).masked_fill(~allow, float("-inf")), dim=-1)
    g = grads(y, [q, k, v], dout)
    inputs = dict(q=q, k=k, v=v, dout=dout) | (dict(keymask=keymask) if masked else {})
    res = run(tmp_path, "attention", dict(B=B, T=T, H=H, KH=KH, D=D, causal=causal), inputs,
              dict(out=((B, T, H, D), np.float32), att=((B, H, T, T), np.float32), dq=((B, T, H, D), np.float32),
                   dk=((B, T, KH, D), np.float32), dv=((B, T, KH, D), np.float32)))
    close("out", res["out"], y, FWD)
    close("att", res["att"], att, FWD)
    assert (res["att"][~allow.expand(B, H, T, T)] == 0).all(), "masked probabilities must be exactly 0"
    close("dq", res["dq"], g[0], BWD)
    close("dk", res["dk"], g[1], BWD)
    close("dv", res["dv"], g[2], BWD)


def test_swiglu(tmp_path):
    torch.manual_seed(8)
    N = 300
    gate, up, dout = rand(N, lo=-12, hi=12).requires_grad_(), rand(N, lo=-3, hi=3).requires_grad_(), rand(N)
    y = F.silu(gate) * up
    g = grads(y, [gate, up], dout)
    res = run(tmp_path, "swiglu", dict(N=N), dict(gate=gate, up=up, dout=dout),
              dict(out=((N,), np.float32), dgate=((N,), np.float32), dup=((N,), np.float32)))
    close("out", res["out"], y, FWD)
    close("dgate", res["dgate"], g[0], BWD)
    close("dup", res["dup"], g[1], BWD)


@pytest.mark.parametrize("kind", ["gelu", "relu"])
def test_unary(tmp_path, kind):
    torch.manual_seed(9)
    N = 300
    x, dout = rand(N, lo=-6, hi=6), rand(N)
    x[:3] = torch.tensor([0.0, -0.0, 1e-30])   # relu's kink: PyTorch's gradient at 0 is 0
    x.requires_grad_()
    y = F.gelu(x, approximate="none") if kind == "gelu" else F.relu(x)
    (g,) = grads(y, [x], dout)
    res = run(tmp_path, kind, dict(N=N), dict(inp=x, dout=dout), dict(out=((N,), np.float32), dinp=((N,), np.float32)))
    close("out", res["out"], y, FWD)
    close("dinp", res["dinp"], g, BWD)


@pytest.mark.parametrize("Cin,Tin,Cout,K,stride,pad,bias",
                         [(5, 20, 6, 3, 1, 1, True), (6, 21, 4, 3, 2, 1, True), (16, 30, 8, 3, 2, 1, False),
                          (3, 9, 2, 1, 1, 0, True), (4, 10, 3, 5, 3, 2, True)])
def test_conv1d(tmp_path, Cin, Tin, Cout, K, stride, pad, bias):
    torch.manual_seed(10)
    x, w, b = rand(Cin, Tin), rand(Cout, Cin, K), rand(Cout)
    y = F.conv1d(x[None], w, b if bias else None, stride=stride, padding=pad)[0]
    inputs = dict(inp=x, w=w) | (dict(b=b) if bias else {})
    res = run(tmp_path, "conv1d", dict(Cin=Cin, Tin=Tin, Cout=Cout, K=K, stride=stride, pad=pad), inputs,
              dict(out=(tuple(y.shape), np.float32)))
    close("out", res["out"], y, FWD)


def test_xent(tmp_path):
    torch.manual_seed(11)
    N, V, ld, dscale = 9, 50, 53, 0.5
    logits = rand(N, ld, lo=-4, hi=4)
    logits[:, V:] = 777.0   # beyond V: must be left alone
    logits[2, 10] = 90.0    # large logits, argmax == label below
    labels = torch.randint(0, V, (N,), dtype=torch.int32)
    labels[2] = 10
    logits[3, 7] = logits[3, 20] = 9.0   # tied maximum: the first one counts, as torch.argmax
    labels[3] = 7
    labels[[1, 5]] = -100
    x = logits[:, :V].clone().requires_grad_()
    loss = F.cross_entropy(x, labels.long(), ignore_index=-100, reduction="sum")
    (g,) = torch.autograd.grad(loss, [x])
    res = run(tmp_path, "xent", dict(N=N, V=V, ld=ld, dscale=dscale), dict(logits=logits, labels=labels),
              dict(grad=((N, ld), np.float32), loss=((1,), np.float64), ncorrect=((1,), np.int64)))
    close("loss", res["loss"], loss.reshape(1), FWD)
    close("grad", res["grad"][:, :V], g * dscale, BWD)
    assert (res["grad"][:, V:] == 777.0).all(), "columns beyond V changed"
    assert (res["grad"][[1, 5], :V] == 0).all(), "ignored rows must get zero gradient"
    valid = labels != -100
    want_correct = ((x.argmax(-1) == labels.long()) & valid).sum().item()
    assert res["ncorrect"].item() == want_correct
