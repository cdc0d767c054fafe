"""The device seam's guard backend (--device guard, src/kernels/ops_guard.c): the backend's memory is out
of the host's reach outside its own calls, so a run that reads a loss sum, a gradient norm, a bucket, an activation
or the head's rows on the host without the seam's download stops with SIGSEGV (tests/unit/test_ops_guard.c: a host
read does); strict (its default, every run here) a kernel given host memory stops the run naming the member and the
argument; its kernels run only at download and free, as on a device's stream, so a result read without a download
or a host array changed before the kernel ran gives other numbers. A run on it (training with parameter terms, a save, a resume; ZeRO 0-3 at 1
and 2 ranks with the head's rows balanced; bf16; LoRA with dropout; packed rows; speech inputs with the feature
cache; inference with and without the KV cache, spoken, batched) gives the numbers and bytes of the CPU backend."""
import json
import re

import pytest

from oracle import slam_omni_ref as ref
from oracle import slam_samples_ref as sref
from omni_run import logs, run, tiny_slam
from test_speech_train import write_data, write_wav

ARGS = ["--learning_rate", "2e-3", "--max_length", "64", "--save_steps", 2, "--gradient_accumulation_steps", 2,
        "--param_loss", "l2:0.01:group_decode_adapter", "--param_loss", "dummy:model.layers.0."]
KEYS = ("loss", "param_loss", "grad_norm", "head_rows_moved")
# Every run on the guard is strict (--device guard; guard:lax is not): a kernel given host memory (where a device
# needs its own) stops it

def steps(out):
    return [{k: x.get(k) for k in ("step", *KEYS)} for x in logs(out) if "loss" in x]


@pytest.mark.parametrize("ranks", [1, 2])
def test_guard_backend_trains_and_resumes_as_the_cpu_backend(tmp_path_factory, ranks):
    d = tiny_slam(tmp_path_factory, f"guard{ranks}", 8)

    def sft(out, backend, extra=()):
        args = ["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / out,
                "--max_steps", 3, *ARGS, *(["--deepspeed", "zero3"] if ranks > 1 else []), *extra]
        return run(args, np_=ranks if ranks > 1 else None, device=backend, timeout=180)

    sft("cpu", "cpu")
    sft("guard", "guard")
    sft("resumed", "guard", ["--resume_from_checkpoint", d / "guard" / "checkpoint-2"])
    want = steps(d / "cpu")
    assert [x["step"] for x in want] == [1, 2, 3] and all(x["param_loss"] for x in want), want
    assert steps(d / "guard") == want
    assert steps(d / "resumed") == want[2:]


def test_guard_backend_value_is_checked(tmp_path):
    p = run(["plan", "--model", "qwen2.5-0.5b"], check=False, device="gpu")
    assert p.returncode == 2 and "--device: 'gpu' is not supported" in p.stderr and "(guard, guard:lax)" in p.stderr, \
        p.stderr
    p = run(["plan", "--model", "qwen2.5-0.5b"], check=False, env={"OMNISHARD_BACKEND": "guard"})
    assert p.returncode == 2 and "OMNISHARD_BACKEND: no longer read (got 'guard'): it is the option --device guard" \
        in p.stderr, p.stderr


def test_guard_strict_switch_is_checked(tmp_path):
    """Strict is the guard's default; --device guard:lax turns it off, anything else is refused; the variable that
    switched it before is refused naming the option."""
    p = run(["plan", "--model", "qwen2.5-0.5b"], check=False, device="guard:yes")
    assert p.returncode == 2 and "--device: 'guard:yes' is not supported" in p.stderr, p.stderr
    p = run(["plan", "--model", "qwen2.5-0.5b"], check=False, env={"OMNISHARD_GUARD_STRICT": "0"})
    assert p.returncode == 2 and "OMNISHARD_GUARD_STRICT: no longer read (got '0')" in p.stderr and \
        "--device guard:lax" in p.stderr, p.stderr
    run(["plan", "--model", "qwen2.5-0.5b"], device="guard:lax")


# ---- the ZeRO runtime's buckets (parameters, gradients, moments, gathered buckets) on the guard's memory ----
def run_both(d, args, ranks, timeout=180):
    """sft with args on the CPU backend into d/cpu and on the strict guard into d/guard"""
    for backend in ("cpu", "guard"):
        a = ["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / backend, *args]
        run(a, np_=ranks if ranks > 1 else None, device=backend, timeout=timeout)


def same_files(a, b, names):
    for f in names:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


RUNTIME = ["--learning_rate", "2e-3", "--max_length", "64", "--max_steps", 3, "--gradient_accumulation_steps", 2,
           "--save_steps", 2, "--trainable_embed_rows", "new"]


@pytest.mark.parametrize("ranks,stage,dtype", [(1, 0, "float32"), (1, 3, "bfloat16"), (2, 0, "float32"),
                                               (2, 1, "bfloat16"), (2, 2, "float32"), (2, 3, "bfloat16"),
                                               (2, 3, "float32")])
def test_guard_runtime_trains_saves_and_exports_as_the_cpu_backend(tmp_path_factory, ranks, stage, dtype):
    """Every ZeRO stage at 1 and 2 ranks (the collectives staged through host buffers on the guard), fp32 and bf16
    (the rounded copies, the stage 3 gather in bf16): the logged numbers, the checkpoint's rank files and the
    exported model are the CPU backend's bytes; an export from the checkpoint too."""
    d = tiny_slam(tmp_path_factory, f"grt{ranks}{stage}{dtype[:2]}", 8)
    run_both(d, [*RUNTIME, "--zero_stage", stage, "--torch_dtype", dtype], ranks)
    assert steps(d / "guard") == steps(d / "cpu") and len(steps(d / "cpu")) == 3
    ck = [f"rank-{r:05d}.safetensors" for r in range(ranks)]
    same_files(d / "cpu" / "checkpoint-2", d / "guard" / "checkpoint-2", ck)
    same_files(d / "cpu" / "final_model", d / "guard" / "final_model", ["model.safetensors", "slam_omni.safetensors"])
    for backend in ("cpu", "guard"):
        run(["export", "--checkpoint", d / backend / "checkpoint-2", "--output_dir", d / f"x{backend}"],
            np_=ranks if ranks > 1 else None, device=backend)
    same_files(d / "xcpu", d / "xguard", ["model.safetensors", "slam_omni.safetensors"])


@pytest.mark.parametrize("merge", ["true", "false"])
def test_guard_runtime_lora_as_the_cpu_backend(tmp_path_factory, merge):
    """LoRA at ZeRO-3 on 2 ranks with dropout, resumed: the losses, the merged export (the merge's product on the
    backend) or the base + adapter directory are the CPU backend's bytes."""
    d = tiny_slam(tmp_path_factory, f"glora{merge}", 8)
    lora = ["--train_type", "lora", "--lora_rank", 4, "--lora_alpha", 8, "--merge_lora", merge]
    run_both(d, [*RUNTIME, "--deepspeed", "zero3", *lora], 2)
    assert steps(d / "guard") == steps(d / "cpu")
    files = ["model.safetensors"] + (["lora_adapter/adapter_model.safetensors"] if merge == "false" else [])
    same_files(d / "cpu" / "final_model", d / "guard" / "final_model", files)
    args = ["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / "resumed", *RUNTIME,
            "--deepspeed", "zero3", *lora, "--resume_from_checkpoint", d / "guard" / "checkpoint-2"]
    run(args, np_=2, device="guard", timeout=180)
    assert steps(d / "resumed") == steps(d / "cpu")[2:]
    same_files(d / "cpu" / "final_model", d / "resumed" / "final_model", files)


@pytest.mark.parametrize("ranks", [1, 2])
def test_guard_runtime_stops_on_non_finite_as_the_cpu_backend(tmp_path_factory, ranks):
    """A huge learning rate: the guard stops at the CPU backend's step naming the same first non-finite parameter
    (the check runs on the backend, its answers read once)."""
    d = tiny_slam(tmp_path_factory, f"gnan{ranks}", 6)
    said = {}
    for backend in ("cpu", "guard"):
        p = run(["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / backend,
                 "--max_steps", 12, "--learning_rate", "1e10", "--max_grad_norm", "0", "--save_steps", 0,
                 *(["--deepspeed", "zero3"] if ranks > 1 else [])], np_=ranks if ranks > 1 else None, check=False,
                device=backend, timeout=180)
        m = re.search(r"step (\d+): non-finite .*first parameter with a non-finite \w+: '([^']+)'", p.stderr)
        assert p.returncode > 0 and m, p.stderr
        said[backend] = m.groups()
    assert said["guard"] == said["cpu"], said


# ---- the model's side in strict mode: every kernel argument on the backend's memory (activations, KV cache, the
# head's targets and rows, LoRA's dropout, the inputs uploaded once per micro-batch, the speech front end) ----
@pytest.mark.parametrize("case,ranks,extra", [
    ("zero3-bf16-balanced", 2, ["--deepspeed", "zero3", "--torch_dtype", "bfloat16"]),
    ("lora-dropout", 2, ["--zero_stage", 2, "--train_type", "lora", "--lora_rank", 4, "--lora_alpha", 8,
                         "--lora_dropout", "0.2"]),
    ("packed-dump-logits", 1, ["--packing", "true", "--per_device_train_batch_size", 2])])
def test_guard_strict_trains_as_the_cpu_backend(tmp_path_factory, case, ranks, extra):
    """The strict guard (a kernel given host memory stops the run naming it): the logged numbers, the final model
    and the rank 0 logits dump (downloaded chunk by chunk) are the CPU backend's bytes. The balanced head moves rows
    (its messages downloaded and uploaded), LoRA drops inputs on the backend, packed rows upload their positions."""
    d = tiny_slam(tmp_path_factory, f"gstrict-{case}", 8)
    for backend in ("cpu", "guard"):
        dump = ["--dump_logits", d / backend / "logits.safetensors"] if ranks == 1 else []
        a = ["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / backend, *RUNTIME,
             "--save_steps", 0, *extra, *dump]
        run(a, np_=ranks if ranks > 1 else None, device=backend,
            timeout=240)
    want = steps(d / "cpu")
    assert steps(d / "guard") == want and len(want) == 3
    if case.startswith("zero3"):
        assert any(x["head_rows_moved"] for x in want), want
    same_files(d / "cpu" / "final_model", d / "guard" / "final_model", ["model.safetensors"])
    if dump:
        same_files(d / "cpu", d / "guard", ["logits.safetensors"])


T_SPEECH, A_SPEECH, G_SPEECH = 192, 80, 3   # tests/test_speech_train.py's vocabulary (its write_data)


@pytest.mark.parametrize("kind,packed", [("linear", False), ("cov1d-linear", False), ("linear", True)])
def test_guard_strict_speech_trains_as_the_cpu_backend(tmp_path_factory, kind, packed):
    """Speech inputs on 2 ranks at ZeRO-3 (WAV -> log-mel uploaded -> Whisper encoder -> projector -> splice, the
    projector's backward; packed: several speech inputs in a row), the encoder outputs written to the feature cache
    and read back from it by a second run: the strict guard logs the CPU backend's numbers and writes its final
    model's bytes."""
    d = tmp_path_factory.mktemp(f"gspeech-{kind}{'-packed' if packed else ''}")
    ref.make_model(str(d / "model"), hidden=32, layers=2, heads=4, kv_heads=2, inter=48, T=T_SPEECH, A=A_SPEECH,
                   G=G_SPEECH, tied=True, seed=0)
    ref.add_projector(str(d / "model"), 16, 24, 32, kind=kind)
    ref.make_encoder(str(d / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    for name, sec, fr in [("a.wav", 0.3, 300), ("b.wav", 0.6, 500), ("c.wav", 1.1, 700)]:
        write_wav(d / name, sec, fr, seed=fr)
    write_data(d / "data.jsonl", 6, {0: "a.wav", 2: "b.wav", 3: "c.wav", 5: "a.wav"})
    for cache in ("write", "read"):
        for backend in ("cpu", "guard"):
            out = d / f"{backend}-{cache}"
            a = ["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", out, "--max_steps", 3,
                 "--learning_rate", "1e-3", "--max_length", 64, "--deepspeed", "zero3", "--speech_encoder", d / "enc",
                 "--cache_speech_features", d / f"cache-{backend}",
                 *(["--packing", "true", "--per_device_train_batch_size", 2] if packed else [])]
            run(a, np_=2, device=backend, timeout=240)
        want = steps(d / f"cpu-{cache}")
        assert steps(d / f"guard-{cache}") == want and len(want) == 3, cache
        same_files(d / f"cpu-{cache}" / "final_model", d / f"guard-{cache}" / "final_model",
                   ["model.safetensors", "slam_omni.safetensors"])
    assert sorted(p.name for p in (d / "cache-guard").iterdir()) == sorted(p.name for p in (d / "cache-cpu").iterdir())


def test_guard_strict_infers_as_the_cpu_backend(tmp_path):
    """omnishard infer on the strict guard: a text question with and without the KV cache (the last position's
    logits downloaded each step), a spoken question (encoder and projector on the backend), records decoded 2 at a
    time (one KV cache each): the CPU backend's tokens, stop reasons and counts."""
    d = tmp_path / "m"
    sref.make_model_dir(str(d), T=512, A=80, G=3, hidden=32, layers=2, heads=4, kv_heads=2, inter=64, seed=1)
    ref.add_projector(str(d), 16, 24, 32)
    ref.make_encoder(str(tmp_path / "enc"), d_model=16, layers=2, heads=4, ffn=32, max_pos=30, layout="cond")
    write_wav(tmp_path / "q.wav", 0.5, 440, seed=1)
    sref.write_jsonl(tmp_path / "data.jsonl", sref.make_records(5, A=80, seed=3))
    question = ["--question", "What is the weather like?", "--max_new_tokens", 6]
    cases = {"kv": question, "no-kv": [*question, "--kv_cache", "false"],
             "spoken": ["--wav", tmp_path / "q.wav", "--speech_encoder", tmp_path / "enc", *question[2:]],
             "batched": ["--dataset", tmp_path / "data.jsonl", "--infer_batch_size", 2, "--max_new_tokens", 6]}
    for name, args in cases.items():
        got = {}
        for backend in ("cpu", "guard"):
            out = tmp_path / f"{name}-{backend}.jsonl"
            extra = ["--output_file", out] if name == "batched" else []
            p = run(["infer", "--model", d, *args, *extra], device=backend,
                    timeout=120)
            text = out.read_text() if extra else p.stdout
            got[backend] = [{k: v for k, v in json.loads(s).items() if k != "seconds"} for s in text.splitlines()]
        assert got["guard"] == got["cpu"] and got["cpu"], name
