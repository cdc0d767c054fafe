"""Runs every C unit-test binary $(BUILD)/tests/test_* that takes no arguments and expects exit code 0.

Helper programs driven by other pytest files (names ending in _io or _tool) are left out.
"""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = ROOT / os.environ.get("OMNISHARD_BUILD", "build") / "tests"
BINS = sorted(p for p in TESTS.glob("test_*")
              if p.is_file() and os.access(p, os.X_OK) and not p.name.endswith(("_io", "_tool")))


def test_unit_binaries_built():
    assert BINS, f"no unit-test binaries in {TESTS}: build them with make"


@pytest.mark.parametrize("binary", BINS, ids=lambda p: p.name)
def test_unit_binary(binary):
    r = subprocess.run([str(binary)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{binary.name} exited {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
