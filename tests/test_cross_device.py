"""A checkpoint is the same file whichever backend wrote it (issue 25 item 5): a run saved on the device resumes on
the CPU backend, and one saved on the CPU resumes on the device, each continuing as the run that stayed on one
backend. The device is OMNISHARD_TEST_DEVICE's (cuda on a lent GPU: tools/device-check.sh); without it the guard
backend (--device guard: the CPU kernels on memory out of the host's reach) stands in for one, and every
number must then be equal bit for bit. On a GPU the two backends sum in other orders: within 1e-5."""
import os

from omni_run import DEVICE, logs, rel, run, tiny_slam, weights

GPU = DEVICE not in (None, "cpu", "guard")
ON_DEVICE = (DEVICE, {}) if GPU else ("guard", {})
ON_CPU = ("cpu", {})
ARGS = ["--learning_rate", "2e-3", "--max_length", "64", "--save_steps", 2, "--max_steps", 4, "--weight_decay", "0.01"]


def test_checkpoint_moves_between_the_device_and_the_cpu(tmp_path_factory):
    d = tiny_slam(tmp_path_factory, "xdev", 8)

    def sft(out, side, extra=()):
        dev, env = side
        run(["sft", "--device", dev, "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / out,
             *ARGS, *extra], env=env, timeout=240)
        return [(x["step"], x["loss"], x["grad_norm"]) for x in logs(d / out) if "loss" in x]

    dev, cpu = sft("dev", ON_DEVICE), sft("cpu", ON_CPU)
    to_cpu = sft("to_cpu", ON_CPU, ["--resume_from_checkpoint", d / "dev" / "checkpoint-2"])
    to_dev = sft("to_dev", ON_DEVICE, ["--resume_from_checkpoint", d / "cpu" / "checkpoint-2"])
    assert [s for s, _, _ in to_cpu] == [s for s, _, _ in to_dev] == [3, 4], (to_cpu, to_dev)
    tol = 1e-5 if GPU else 0.0
    for got, want in ((to_cpu, dev[2:]), (to_dev, cpu[2:]), (dev, cpu)):
        for (s, l, g), (s2, l2, g2) in zip(got, want):
            assert s == s2 and abs(l - l2) <= tol * abs(l2) and abs(g - g2) <= tol * abs(g2), (got, want)
    for a, b in (("to_cpu", "dev"), ("to_dev", "cpu")):
        wa, wb = weights(os.path.join(d, a, "final_model")), weights(os.path.join(d, b, "final_model"))
        assert set(wa) == set(wb)
        for k in wb:
            assert rel(wa[k], wb[k]) <= tol, (a, b, k, rel(wa[k], wb[k]))
