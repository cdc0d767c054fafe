"""OMNISHARD_HUGEPAGES (src/core/alloc.c, docs/zero.md "Huge pages"): the pool's fresh mappings ask for transparent huge
pages unless it is 0, checked on the mappings themselves by the unit test test_alloc_pool (run here with 0; the unit
test run covers unset); any other value is an option error of `omnishard sft`."""
import os, subprocess

from conftest import BIN, BUILD, ROOT


def test_zero_leaves_the_pool_to_the_system():
    p = subprocess.run([str(BUILD / "tests" / "test_alloc_pool")], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, OMNISHARD_HUGEPAGES="0"), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_another_value_is_an_option_error(tmp_path):
    p = subprocess.run([str(BIN), "sft", "--model", str(tmp_path / "m"), "--dataset", str(tmp_path / "d.jsonl"),
                        "--output_dir", str(tmp_path / "out")], capture_output=True, text=True,
                       env=dict(os.environ, OMNISHARD_HUGEPAGES="yes"), timeout=60)
    assert p.returncode != 0
    assert "OMNISHARD_HUGEPAGES: expected 1" in p.stderr and "got 'yes'" in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()
