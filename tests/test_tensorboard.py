"""--report_to tensorboard (issue 22, item 2; docs/training.md "TensorBoard"): the event files under
OUTPUT_DIR/runs (or --logging_dir) read back by the tensorboard package's own reader and checksum code, every
number of logging.jsonl present under transformers' tag names (train/K, eval/K) as float32."""
import glob, json, os, struct

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

from omni_run import logs, sft, tiny_slam
from test_input_checks import parse_error


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_slam(tmp_path_factory, "tb", 4, val_samples=2)


def train(tiny, out, steps, *extra, np_=None):
    return sft(str(tiny / "model"), str(tiny / "data.jsonl"), str(out), steps,
               ["--val_dataset", str(tiny / "val.jsonl"), "--eval_steps", 2, "--logging_steps", 1, *extra], np_=np_)


def tag(key):   # transformers' rewrite_logs
    return "eval/" + key[5:] if key.startswith("eval_") else "train/" + key


def expected(lines):
    """{(tag, step): float32 value} of every number in the log lines"""
    want = {}
    for l in lines:
        for k, v in l.items():
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
                want.setdefault(tag(k), {})[l["step"]] = np.float32(v)
    return want


def records(path):
    """the framing checked with tensorboard's own masked CRC32C: [(length, data)]"""
    raw, out, at = open(path, "rb").read(), [], 0
    while at < len(raw):
        head = raw[at:at + 8]
        (n,) = struct.unpack("<Q", head)
        (hc,) = struct.unpack("<I", raw[at + 8:at + 12])
        data = raw[at + 12:at + 12 + n]
        (dc,) = struct.unpack("<I", raw[at + 12 + n:at + 16 + n])
        assert hc == masked_crc32c(head) and dc == masked_crc32c(data)
        out.append(data)
        at += 16 + n
    return out


def scalars(files):
    """{tag: {step: value}} read by the reader TensorBoard itself uses, file by file"""
    got, first = {}, []
    for f in files:
        events = list(LegacyEventFileLoader(f).Load())
        assert len(events) == len(records(f))
        first.append(events[0].file_version)
        for e in events[1:]:
            for v in e.summary.value:
                assert v.HasField("simple_value")
                got.setdefault(v.tag, {})[e.step] = np.float32(v.simple_value)
    assert first == ["brain.Event:2"] * len(files)
    return got


def test_every_logged_number_is_a_tensorboard_scalar(tiny, tmp_path):
    out = tmp_path / "o"
    train(tiny, out, 3, "--report_to", "tensorboard", "--deepspeed", "zero3", np_=2)
    files = sorted(glob.glob(str(out / "runs" / "events.out.tfevents.*")))
    assert len(files) == 1   # rank 0's only
    want, got = expected(logs(out)), scalars(files)
    assert got == want
    for t in ("train/loss", "train/learning_rate", "train/grad_norm", "train/audio_loss_0", "train/audio_acc_2",
              "train/text_loss", "train/tokens_per_s", "train/memory(GiB)", "eval/loss", "eval/audio_loss_1",
              "eval/text_acc"):
        assert t in got, t
    assert sorted(got["eval/loss"]) == [2, 3] and sorted(got["train/loss"]) == [1, 2, 3]
    # what TensorBoard's scalar dashboard loads from the folder
    acc = event_accumulator.EventAccumulator(str(out / "runs"), size_guidance={event_accumulator.SCALARS: 0}).Reload()
    assert [(s.step, np.float32(s.value)) for s in acc.Scalars("train/loss")] == sorted(want["train/loss"].items())


def test_logging_dir_and_a_resumed_run_adds_a_file(tiny, tmp_path):
    out, tb = tmp_path / "o", tmp_path / "tb"
    train(tiny, out, 2, "--report_to", "all", "--logging_dir", str(tb), "--save_steps", 1)
    assert not (out / "runs").exists()
    first = glob.glob(str(tb / "events.out.tfevents.*"))
    assert len(first) == 1
    before = open(first[0], "rb").read()
    train(tiny, out, 3, "--report_to", "tensorboard", "--logging_dir", str(tb), "--save_steps", 1,
          "--resume_from_checkpoint", str(out / "checkpoint-1"))
    files = sorted(glob.glob(str(tb / "events.out.tfevents.*")), key=os.path.getmtime)
    assert len(files) == 2 and files[0] == first[0] and open(first[0], "rb").read() == before
    resumed = scalars(files[1:])
    assert sorted(resumed["train/loss"]) == [2, 3]   # the resumed run's steps only, in its own file
    # the log keeps step 1 of the first run and steps 2-3 of the resumed one: the same numbers as the events
    lines = logs(out)
    assert expected([l for l in lines if l["step"] >= 2]) == resumed


def test_without_report_to_no_event_file(tiny, tmp_path):
    out = tmp_path / "o"
    train(tiny, out, 1)
    assert not (out / "runs").exists()


def test_wandb_is_refused_with_the_reason(tmp_path):
    err = parse_error(tmp_path, "--report_to", "wandb")
    assert "--report_to wandb: Weights & Biases sends the metrics to its server over the network" in err, err
    err = parse_error(tmp_path, "--report_to", "swanlab")
    assert "--report_to: 'swanlab' is not supported (supported: none, tensorboard or all)" in err, err


def test_an_event_file_write_that_fails_stops_the_run(tiny, tmp_path):
    """--logging_dir on a file: the run stops before training, naming it"""
    (tmp_path / "afile").write_text("x")
    p = sft(str(tiny / "model"), str(tiny / "data.jsonl"), str(tmp_path / "o"), 1,
            ["--report_to", "tensorboard", "--logging_dir", str(tmp_path / "afile" / "runs")], check=False)
    assert p.returncode != 0 and "afile" in p.stderr, p.stderr


def loss_points(runs):
    """train/loss as TensorBoard's scalar dashboard loads it from the folder: [(step, value)] in load order"""
    acc = event_accumulator.EventAccumulator(str(runs), size_guidance={event_accumulator.SCALARS: 0}).Reload()
    return [(s.step, np.float32(s.value)) for s in acc.Scalars("train/loss")]


def log_points(out):
    return [(l["step"], np.float32(l["loss"])) for l in logs(out) if "loss" in l]


def test_overwrite_removes_the_earlier_runs_event_files(tiny, tmp_path):
    """--overwrite_output_dir: the earlier run's event files go with its other files (in OUTPUT_DIR/runs and under
    --logging_dir), so TensorBoard shows the new run's curve only (was: both merged, 5 points for 2 steps)"""
    out, tb = tmp_path / "o", tmp_path / "tb"
    train(tiny, out, 3, "--report_to", "tensorboard")
    train(tiny, out, 2, "--report_to", "tensorboard", "--overwrite_output_dir", "true")
    assert loss_points(out / "runs") == log_points(out) and [s for s, _ in log_points(out)] == [1, 2]
    o2 = tmp_path / "o2"
    train(tiny, o2, 3, "--report_to", "tensorboard", "--logging_dir", str(tb))
    train(tiny, o2, 2, "--report_to", "tensorboard", "--logging_dir", str(tb), "--overwrite_output_dir", "true")
    assert len(glob.glob(str(tb / "events.out.tfevents.*"))) == 1
    assert loss_points(tb) == log_points(o2) and [s for s, _ in log_points(o2)] == [1, 2]


def test_a_resumed_run_purges_the_abandoned_points(tiny, tmp_path):
    """A run resumed from checkpoint-2 of a run that logged 4 steps: its event file starts with TensorBoard's
    SessionLog START at step 3, so TensorBoard drops the earlier run's steps 3 and 4 (as logging.jsonl does) and
    shows one point per step (was: 3 and 4 twice)"""
    out = tmp_path / "o"
    train(tiny, out, 4, "--report_to", "tensorboard", "--save_steps", 2)
    train(tiny, out, 5, "--report_to", "tensorboard", "--save_steps", 2, "--learning_rate", "1e-4",
          "--resume_override_config", "true", "--resume_from_checkpoint", str(out / "checkpoint-2"))
    files = sorted(glob.glob(str(out / "runs" / "events.out.tfevents.*")))
    assert len(files) == 2
    start = [e for e in LegacyEventFileLoader(files[1]).Load() if e.HasField("session_log")]
    assert [(e.step, e.session_log.status) for e in start] == [(3, 1)]   # SessionLog.START
    got = loss_points(out / "runs")
    assert [s for s, _ in got] == [1, 2, 3, 4, 5] and got == log_points(out)
