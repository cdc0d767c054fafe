"""The sharding runtime's promises: resume, export from a checkpoint, failures end every rank, start-up agreement,
recomputation, loss terms over parameters (the user's crash), ranks with different kinds of batches, memory."""
import json, os, subprocess, time
import numpy as np
import pytest
from safetensors.numpy import load_file

from oracle import slam_omni_ref as ref
from omni_run import sft, logs, weights, rel, run, MPIRUN
from conftest import BIN

COMMON = ["--learning_rate", "2e-3", "--lr_scheduler_type", "cosine", "--warmup_steps", "1", "--max_length", "64"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    ref.make_model(str(d / "model"), hidden=24, layers=2, heads=4, kv_heads=2, inter=40, T=193, A=81, G=3, tied=False, seed=4)
    ref.make_data(str(d / "data.jsonl"), 9, G=3, T=193, A=81, seed=6)
    return d


def test_resume_is_bitwise(tiny):
    d = tiny
    sft(d / "model", d / "data.jsonl", d / "full", 6, [*COMMON, "--deepspeed", "zero3", "--save_steps", "3"], np_=2)
    assert (d / "full" / "checkpoint-3" / "manifest.json").exists()
    assert not any(p.name.endswith(".tmp") for p in (d / "full").iterdir())
    sft(d / "model", d / "data.jsonl", d / "resumed", 6,
        [*COMMON, "--deepspeed", "zero3", "--save_steps", "3", "--resume_from_checkpoint", d / "full" / "checkpoint-3"], np_=2)
    a, b = logs(d / "full"), logs(d / "resumed")
    assert [x["step"] for x in b] == [4, 5, 6]
    assert [x["loss"] for x in a[3:]] == [x["loss"] for x in b]
    wa, wb = weights(d / "full" / "final_model"), weights(d / "resumed" / "final_model")
    for k in wa:
        assert np.array_equal(wa[k], wb[k]), k


def test_resume_at_other_world_size_and_stage(tiny):
    """The slice layout is stage-independent: a ZeRO-3 checkpoint of 2 ranks resumes on 3 ranks at stage 1."""
    d = tiny
    if not (d / "full" / "checkpoint-3").exists():
        pytest.skip("this resumes test_resume_is_bitwise's checkpoint, which this run did not make (run the whole file)")
    sft(d / "model", d / "data.jsonl", d / "n3", 6, [*COMMON, "--zero_stage", "1", "--save_steps", "3",
        "--resume_from_checkpoint", d / "full" / "checkpoint-3"], np_=3)
    # 3 ranks x batch 1 is another global batch than 2 x 1, so compare the restored state, not later steps:
    # the export of the resumed run's checkpoint-3 is not written; instead export checkpoint-3 on 3 ranks
    run(["export", "--checkpoint", d / "full" / "checkpoint-3", "--output_dir", d / "exp3"], np_=3)
    run(["export", "--checkpoint", d / "full" / "checkpoint-3", "--output_dir", d / "exp1"])
    w3, w1 = weights(d / "exp3"), weights(d / "exp1")
    for k in w1:
        assert np.array_equal(w1[k], w3[k]), k


def test_export_from_checkpoint_equals_final_model(tiny):
    d = tiny
    out = d / "exp_final"
    run(["export", "--checkpoint", d / "full" / "checkpoint-6", "--output_dir", out])
    wa, wb = weights(out), weights(d / "full" / "final_model")
    assert set(wa) == set(wb)
    for k in wa:
        assert np.array_equal(wa[k], wb[k]), k


def test_corrupt_checkpoint_is_refused(tiny, tmp_path):
    d = tiny
    import shutil
    ck = tmp_path / "ck"
    shutil.copytree(d / "full" / "checkpoint-3", ck)
    f = ck / "rank-00001.safetensors"
    b = bytearray(f.read_bytes())
    b[-3] ^= 0xFF
    f.write_bytes(bytes(b))
    p = run(["export", "--checkpoint", ck, "--output_dir", tmp_path / "x"], check=False)
    assert p.returncode != 0 and "rank-00001.safetensors" in p.stderr and "checksum" in p.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("kind", ["error", "crash", "exit"])
def test_one_rank_failing_ends_all_ranks(tiny, kind, tmp_path):
    d = tiny
    t = time.time()
    p = run(["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", tmp_path / "o",
             "--max_steps", 6, "--deepspeed", "zero3"], np_=3, check=False, timeout=120,
            env={"OMNISHARD_FAULT": f"1:2:{kind}"})
    assert p.returncode != 0
    assert time.time() - t < 60
    if kind == "error":
        assert "rank 1: injected fault" in p.stderr


def test_ranks_with_different_flags_stop_with_a_message(tiny, tmp_path):
    d = tiny
    base = [str(BIN), "sft", "--model", str(d / "model"), "--dataset", str(d / "data.jsonl"), "--output_dir",
            str(tmp_path / "o"), "--max_steps", "2", "--deepspeed", "zero3"]
    cmd = [*MPIRUN, "-np", "1", *base, "--learning_rate", "1e-3", ":", "-np", "1", *base, "--learning_rate", "2e-3"]
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode != 0 and time.time() - t < 60
    assert "--learning_rate" in p.stderr and "rank 1" in p.stderr, p.stderr


def test_recomputation_changes_memory_not_numbers(tiny, tmp_path):
    d = tiny
    outs = {}
    for gc in ("true", "false"):
        o = tmp_path / gc
        sft(d / "model", d / "data.jsonl", o, 2, [*COMMON, "--gradient_checkpointing", gc, "--per_device_train_batch_size", 4,
            "--dump_grads", o / "g.safetensors"])
        outs[gc] = o
    # bitwise: the recomputed forward is the same computation on the same inputs (and the last layer's, which is
    # not recomputed, is read from the forward's own buffers), and every kernel sums in a fixed order
    la, lb = logs(outs["true"]), logs(outs["false"])
    assert [x["loss"] for x in la] == [y["loss"] for y in lb]
    ga, gb = load_file(str(outs["true"] / "g.safetensors")), load_file(str(outs["false"] / "g.safetensors"))
    assert sorted(ga) == sorted(gb)
    for k in ga:
        assert np.array_equal(ga[k], gb[k]), (k, rel(ga[k], gb[k]))


@pytest.mark.parametrize("term", ["dummy:group_decode_adapter", "l2:0.01:group_decode_adapter", "l2:0.003:model.layers.1"])
def test_loss_terms_over_parameters_match_pytorch(tmp_path, term):
    """The user's crash (DeepSpeed ZeRO-3: 'SumBackward0 returned an invalid gradient ... [12480]'): the DDP dummy
    term over the adapter's parameters, and L2 penalties, at stage 3 on 2 ranks == stage 0 == PyTorch."""
    mdir, data = str(tmp_path / "model"), str(tmp_path / "data.jsonl")
    model, adapter = ref.make_model(mdir, hidden=24, layers=2, heads=4, kv_heads=2, inter=40, T=192, A=80, G=3, tied=True)
    ref.make_data(data, 4, G=3, T=192, A=80, seed=2)
    args = ["--learning_rate", "1e-3", "--lr_scheduler_type", "linear", "--max_length", "64", "--param_loss", term]
    sft(mdir, data, tmp_path / "s3", 2, [*args, "--deepspeed", "zero3", "--dump_grads", tmp_path / "g3.safetensors"], np_=2)
    sft(mdir, data, tmp_path / "s0", 2, [*args, "--gradient_accumulation_steps", 2, "--dump_grads", tmp_path / "g0.safetensors"])
    kind, *rest = term.split(":")
    pt = [("l2", float(rest[0]), rest[1])] if kind == "l2" else [("dummy", 0.0, rest[0])]
    rlogs, rgrads, rfinal = ref.train(model, adapter, ref.load_data(data, 64), G=3, T=192, A=80, steps=2, lr=1e-3,
                                      accum=2, param_terms=pt)
    for o in ("s3", "s0"):
        for c, r in zip(logs(tmp_path / o), rlogs):
            assert abs(c["loss"] - r["loss"]) <= 1e-5 * abs(r["loss"]), (o, c["loss"], r["loss"])
        g = load_file(str(tmp_path / f"g{o[1]}.safetensors"))
        for k, v in rgrads.items():
            assert rel(g[k], v.numpy()) <= 1e-4, (o, k)
        w = weights(tmp_path / o / "final_model")
        for k, v in rfinal.items():
            assert rel(w[k], v.numpy()) <= 1e-4, (o, k)


def test_ranks_with_different_kinds_of_batches(tmp_path):
    """One rank's sample has no audio targets (the adapter gets no gradient from it), the other's no text
    targets: no hang, and the gradients equal the single-process PyTorch reference."""
    mdir, data = str(tmp_path / "model"), str(tmp_path / "data.jsonl")
    model, adapter = ref.make_model(mdir, hidden=24, layers=2, heads=4, kv_heads=2, inter=40, T=192, A=80, G=3, tied=True)
    ref.make_data(data, 2, G=3, T=192, A=80, seed=9)
    rows = [json.loads(l) for l in open(data)]
    for r in range(3):
        rows[0]["labels"][r] = [-100] * len(rows[0]["labels"][r])   # sample 0: text targets only
    rows[1]["labels"][3] = [-100] * len(rows[1]["labels"][3])         # sample 1: audio targets only
    open(data, "w").write("".join(json.dumps(r) + "\n" for r in rows))
    sft(mdir, data, tmp_path / "o", 2, ["--learning_rate", "1e-3", "--max_length", "64", "--deepspeed", "zero3",
        "--dump_grads", tmp_path / "g.safetensors"], np_=2)
    rlogs, rgrads, _ = ref.train(model, adapter, ref.load_data(data, 64), G=3, T=192, A=80, steps=2, lr=1e-3, accum=2)
    g = load_file(str(tmp_path / "g.safetensors"))
    for k, v in rgrads.items():
        assert rel(g[k], v.numpy()) <= 1e-4, k
    for c, r in zip(logs(tmp_path / "o"), rlogs):
        assert abs(c["loss"] - r["loss"]) <= 1e-5 * abs(r["loss"])


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_stage3_model_state_within_zero_bound(tiny, tmp_path, n):
    d = tiny
    o = tmp_path / "o"
    sft(d / "model", d / "data.jsonl", o, 1, [*COMMON, "--deepspeed", "zero3"], np_=n)
    got = logs(o)[0]["model_state_bytes"]
    w = weights(o / "final_model")
    P = sum(v.size for v in w.values())
    nbuckets = 2 + 2 + 1 + 1   # embed, 2 layers, norm, lm_head, adapter
    assert got <= 16 * (-(-P // n) + 16 * nbuckets), (got, P, n)
    assert got >= 16 * (P // n)
