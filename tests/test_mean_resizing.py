"""New vocabulary rows (a plain Qwen2 checkpoint extended with audio rows) are initialised as transformers'
resize_token_embeddings(mean_resizing=True): N(mean, 1e-9 cov) of the checkpoint's rows, or the mean itself when
that covariance is not positive definite. `--new_rows_init normal` keeps N(0, 0.02)."""
import numpy as np
import pytest
import torch
from safetensors.torch import load_file as load_pt, save_file as save_pt
from transformers import Qwen2ForCausalLM

from oracle import slam_omni_ref as ref
from omni_run import sft, weights

H, T, A, N0 = 32, 128, 1600, 100   # hidden, text vocab, audio vocab, checkpoint rows
EPS = 1e-9                          # transformers' _init_added_embeddings_weights_with_mean


def designed_rows(seed, zero_col=None, n0=N0):
    """[n0, H] rows with a non-zero mean and a well-conditioned, non-diagonal covariance"""
    g = torch.Generator().manual_seed(seed)
    mix = 0.6 * torch.eye(H) + 0.4 * torch.randn(H, H, generator=g) / H ** 0.5
    x = 0.5 * torch.randn(H, generator=g) + torch.randn(n0, H, generator=g) @ mix
    if zero_col is not None:
        x[:, zero_col] = 0.0          # exactly zero variance in one direction: not positive definite
    return x.contiguous()


def make(tmp_path, tied, zero_col=None, n0=N0):
    mdir, data = str(tmp_path / "model"), str(tmp_path / "data.jsonl")
    ref.make_model(mdir, hidden=H, layers=1, heads=4, kv_heads=2, inter=64, T=T, A=A, G=1, tied=tied, ckpt_vocab=n0)
    sd = load_pt(mdir + "/model.safetensors")
    sd["model.embed_tokens.weight"] = designed_rows(1, zero_col, n0)
    if not tied:
        sd["lm_head.weight"] = designed_rows(2, zero_col, n0)
    save_pt(sd, mdir + "/model.safetensors", metadata={"format": "pt"})
    ref.make_data(data, 2, G=1, T=T, A=A)
    return mdir, data


def run(tmp_path, mdir, data, name, extra=()):
    sft(mdir, data, tmp_path / name, 1, ["--learning_rate", "0", "--max_length", "32", *extra])
    return weights(tmp_path / name / "final_model")


def transformers_resized(mdir, seed=0):
    torch.manual_seed(seed)
    m = Qwen2ForCausalLM.from_pretrained(mdir).float()
    m.resize_token_embeddings(T + A)   # mean_resizing=True is the default (transformers >= 4.46)
    return {k: v.detach().numpy() for k, v in m.state_dict().items()}


def assert_distribution(new, old):
    """new rows ~ N(mu, EPS * S) with mu, S the mean and biased covariance of old (transformers' formula):
    whitened by L = chol(EPS * S) they must have mean ~0 and covariance ~I."""
    old = old.astype(np.float64)
    mu = old.mean(0)
    S = (old - mu).T @ (old - mu) / old.shape[0]
    L = np.linalg.cholesky(EPS * S)
    w = np.linalg.solve(L, (new.astype(np.float64) - mu).T).T        # [m, H]
    m = w.shape[0]
    assert np.abs(w.mean(0)).max() < 5 / np.sqrt(m), np.abs(w.mean(0)).max()
    dev = np.linalg.norm(w.T @ w / m - np.eye(H))
    assert dev < 1.5 * np.sqrt((H * H + H) / m), dev                   # E|S_w - I|_F^2 = (H^2 + H) / m


def test_new_rows_follow_the_checkpoint_mean_and_covariance(tmp_path):
    mdir, data = make(tmp_path, tied=False)
    ours, theirs = run(tmp_path, mdir, data, "o"), transformers_resized(mdir)
    for name in ("model.embed_tokens.weight", "lm_head.weight"):   # lm_head: from its own rows, as transformers
        old = load_pt(mdir + "/model.safetensors")[name].numpy()
        assert ours[name].shape == (T + A, H)
        assert np.array_equal(ours[name][:N0], old)
        assert_distribution(theirs[name][N0:], old)                  # the test accepts the reference
        assert_distribution(ours[name][N0:], old)
        # and rejects N(0, 0.02) rows
        with np.testing.assert_raises(AssertionError):
            assert_distribution(np.random.default_rng(0).normal(0, 0.02, (T + A - N0, H)), old)


@pytest.mark.parametrize("zero_col,n0", [(3, N0), (None, 20)])
def test_not_positive_definite_gives_the_mean_as_transformers(tmp_path, zero_col, n0):
    """A constant column (the Cholesky meets an exact zero pivot), or fewer rows than the hidden size (rank < H:
    omnishard declares it not positive definite; transformers' float32 Cholesky decides by rounding, and then draws
    with a spread of about 1e-9-scaled rounding noise): every new row is the mean."""
    mdir, data = make(tmp_path, tied=True, zero_col=zero_col, n0=n0)
    ours, theirs = run(tmp_path, mdir, data, "o"), transformers_resized(mdir)
    e, r = ours["model.embed_tokens.weight"][n0:], theirs["model.embed_tokens.weight"][n0:]
    if zero_col is not None:
        assert (r == r[0]).all()                                     # transformers: every new row is the mean
    assert (e == e[0]).all()
    np.testing.assert_allclose(e, r, rtol=1e-6, atol=1e-6)


def test_normal_option_and_sharding_independence(tmp_path):
    mdir, data = make(tmp_path, tied=True)
    one = run(tmp_path, mdir, data, "a")
    sft(mdir, data, tmp_path / "b", 1, ["--learning_rate", "0", "--max_length", "32", "--deepspeed", "zero3"], np_=3)
    three = weights(tmp_path / "b" / "final_model")
    for k in one:                                                    # each rank samples only its slice
        assert np.array_equal(one[k], three[k]), k
    new = run(tmp_path, mdir, data, "n", ["--new_rows_init", "normal"])["model.embed_tokens.weight"][N0:]
    assert abs(new.std() - 0.02) < 0.002 and abs(new.mean()) < 0.002
