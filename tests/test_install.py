"""make install PREFIX=DIR (binary, tools, docs) and make PORTABLE=1: the installed binary runs from anywhere,
`omnishard convert` finds its script beside it without OMNISHARD_HOME (was: "cannot find the omnishard source
tree"), and the portable build's flags are the ones the Makefile names."""
import os, shutil, subprocess, sys

import pytest
from conftest import BUILD, ROOT


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = tmp_path_factory.mktemp("prefix")
    r = subprocess.run(["make", f"BUILD={BUILD}", f"PREFIX={p}", "install"], cwd=ROOT, capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, r.stdout + r.stderr
    return p


def installed(prefix, tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNISHARD_")}
    # python3 on the PATH is the interpreter of an installed convert: the test venv's (pyarrow, soundfile)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return subprocess.run([str(prefix / "bin" / "omnishard"), *map(str, args)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=env)


def test_install_lays_out_binary_tools_docs(prefix):
    share = prefix / "share" / "omnishard"
    for f in ["tools/convert_parquet.py", "tools/slam_checkpoint.py", "docs/training.md", "docs/spec/slam-omni.md",
              "README.md", "LICENSE"]:
        assert (share / f).is_file(), f
    assert os.access(prefix / "bin" / "omnishard", os.X_OK)


def test_installed_sft_help_and_convert(prefix, tmp_path):
    r = installed(prefix, tmp_path, "sft", "--help")
    assert r.returncode == 0 and "--learning_rate" in r.stdout, r.stderr
    from test_convert import array_rows, write_shard, read_jsonl
    (tmp_path / "data").mkdir()
    write_shard(tmp_path / "data" / "train-00000-of-00001.parquet", array_rows(3, seed=2))
    r = installed(prefix, tmp_path, "convert", tmp_path / "data", "--output_dir", tmp_path / "out", "--no_progress")
    assert r.returncode == 0, r.stderr
    assert len(read_jsonl(tmp_path / "out" / "train.jsonl")) == 3


def test_installed_convert_without_its_script_says_where_it_looked(tmp_path):
    shutil.copy(BUILD / "omnishard", tmp_path / "omnishard")   # a binary alone: no tools beside it
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNISHARD_")}
    r = subprocess.run([str(tmp_path / "omnishard"), "convert", "x"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0 and "share/omnishard/tools/convert_parquet.py" in r.stderr and "OMNISHARD_HOME" in r.stderr, r.stderr


@pytest.mark.parametrize("flags,march", [([], "-march=native"), (["PORTABLE=1"], "-march=x86-64-v2"),
                                         (["MARCH=x86-64-v3"], "-march=x86-64-v3")])
def test_portable_build_flags(tmp_path, flags, march):
    r = subprocess.run(["make", "-n", f"BUILD={tmp_path}", *flags, f"{tmp_path}/obj/src/core/err.o"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and march in r.stdout, r.stdout + r.stderr
