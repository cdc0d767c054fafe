"""make layering (tools/check_layering.py): the tree keeps its folder order and has no include cycle between
modules, by includes or calls; a wrong include, a planted include or call cycle and a stale exception each fail with
file:line."""
import importlib.util
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = os.path.join(ROOT, "tools", "check_layering.py")
_spec = importlib.util.spec_from_file_location("check_layering", CHECK)
layering = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layering)


def run(root):
    p = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def copy_tree(tmp_path):
    shutil.copytree(os.path.join(ROOT, "src"), tmp_path / "src")
    return tmp_path


def add_line(path, line):
    text = path.read_text()
    path.write_text(text + line + "\n")
    return text.count("\n") + 1   # the line number of the added line


def test_tree_passes():
    rc, out = run(ROOT)
    assert rc == 0, out
    assert "layering: ok" in out


def fails_with_added_include(tmp_path, rel, header, message):
    """add `#include "header"` to the copied tree's src/rel: the checker (the script, as make runs it) exits 1 and
    prints src/rel:LINE: message"""
    root = copy_tree(tmp_path)
    no = add_line(root / "src" / rel, '#include "%s"' % header)
    rc, out = run(str(root))
    assert rc == 1, out
    assert 'src/%s:%d: #include "%s": %s' % (rel, no, header, message) in out, out


def test_upward_include_fails(tmp_path):
    fails_with_added_include(tmp_path, "kernels/norm.c", "zero/runtime.h", "kernels -> zero is not allowed (kernels/ may use: core)")


def test_upward_include_in_a_cu_file_fails(tmp_path):
    # the CUDA kernels (.cu) and their device headers (.cuh) are read as the C files are
    fails_with_added_include(tmp_path / "cu", "cuda/cu_norm.cu", "zero/runtime.h",
                             "cuda -> zero is not allowed (cuda/ may use: core, kernels)")
    fails_with_added_include(tmp_path / "cuh", "cuda/cu_kern.cuh", "model/omni.h",
                             "cuda -> model is not allowed (cuda/ may use: core, kernels)")


def test_missing_header_fails(tmp_path):
    fails_with_added_include(tmp_path, "io/atomic.c", "core/no_such.h", "no such header")


def test_exception_lets_one_pair_through(tmp_path, monkeypatch):
    # an exception names one (file, header) pair: that include passes, the same header from a sibling file fails
    root = copy_tree(tmp_path)
    add_line(root / "src" / "kernels" / "norm.c", '#include "zero/comm.h"')
    no = add_line(root / "src" / "kernels" / "rope.c", '#include "zero/comm.h"')
    monkeypatch.setattr(layering, "EXCEPTIONS", {**layering.EXCEPTIONS, ("src/kernels/norm.c", "zero/comm.h"): "t"})
    problems = layering.check(str(root))
    assert problems == ['src/kernels/rope.c:%d: #include "zero/comm.h": kernels -> zero is not allowed (kernels/ may '
                        "use: core)" % no], problems


def test_stale_exception_fails(tmp_path, monkeypatch):
    # once an excepted include is gone, the exception must be deleted (the list only shrinks)
    monkeypatch.setattr(layering, "EXCEPTIONS", {**layering.EXCEPTIONS, ("src/kernels/norm.c", "zero/comm.h"): "t"})
    problems = layering.check(ROOT)
    assert problems == ['src/kernels/norm.c: exception for #include "zero/comm.h" no longer needed: delete it from '
                        "EXCEPTIONS in tools/check_layering.py"], problems


def test_planted_cycle_fails(tmp_path):
    root = copy_tree(tmp_path)
    core = root / "src" / "core"
    (core / "cyc_a.h").write_text('#pragma once\n#include "core/cyc_b.h"\n')
    (core / "cyc_b.h").write_text("#pragma once\n")
    (core / "cyc_b.c").write_text('#include "core/cyc_b.h"\n#include "core/cyc_a.h"\n')
    rc, out = run(str(root))
    assert rc == 1, out
    assert "include cycle between modules core/cyc_a <-> core/cyc_b" in out, out
    assert "core/cyc_a -> core/cyc_b (src/core/cyc_a.h:2)" in out, out
    assert "core/cyc_b -> core/cyc_a (src/core/cyc_b.c:2)" in out, out


def test_planted_call_cycle_fails(tmp_path):
    # two files whose functions call each other through one shared header (no include between them) are a cycle
    root = copy_tree(tmp_path)
    core = root / "src" / "core"
    (core / "cyc.h").write_text("#pragma once\nint cyc_a(int n);\nint cyc_b(int n);\n")
    (core / "cyc_a.c").write_text('#include "core/cyc.h"\n// cyc_b( in a comment is no call\nint cyc_a(int n) {\n'
                                  '    return n ? cyc_b(n - 1) : 0;\n}\n')
    (core / "cyc_b.c").write_text('#include "core/cyc.h"\nint cyc_b(int n) {\n    return n ? cyc_a(n - 1) : 1;\n}\n')
    rc, out = run(str(root))
    assert rc == 1, out
    assert "call cycle between modules core/cyc_a <-> core/cyc_b" in out, out
    assert "core/cyc_a -> core/cyc_b (src/core/cyc_a.c:4 (calls cyc_b))" in out, out
    assert "core/cyc_b -> core/cyc_a (src/core/cyc_b.c:3 (calls cyc_a))" in out, out
    (core / "cyc_b.c").write_text('#include "core/cyc.h"\nint cyc_b(int n) {\n    return n;\n}\n')   # one way
    rc, out = run(str(root))
    assert rc == 0, out


def test_planted_call_cycle_between_cu_files_fails(tmp_path):
    # a .cu file calling a function another .cu file defines uses that module, as between .c files
    root = copy_tree(tmp_path)
    cuda = root / "src" / "cuda"
    (cuda / "cyc.h").write_text("#pragma once\nint cyc_a(int n);\nint cyc_b(int n);\n")
    (cuda / "cyc_a.cu").write_text('#include "cyc.h"\nint cyc_a(int n) {\n    return n ? cyc_b(n - 1) : 0;\n}\n')
    (cuda / "cyc_b.cu").write_text('#include "cyc.h"\nint cyc_b(int n) {\n    return n ? cyc_a(n - 1) : 1;\n}\n')
    rc, out = run(str(root))
    assert rc == 1, out
    assert "call cycle between modules cuda/cyc_a <-> cuda/cyc_b" in out, out
    assert "cuda/cyc_a -> cuda/cyc_b (src/cuda/cyc_a.cu:3 (calls cyc_b))" in out, out


def test_stale_cycle_exception_fails(monkeypatch):
    monkeypatch.setattr(layering, "CYCLE_EXCEPTIONS",
                        {**layering.CYCLE_EXCEPTIONS, frozenset({"core/err", "core/alloc"}): "t"})
    problems = layering.check(ROOT)
    assert problems == ["tools/check_layering.py: cycle exception for core/alloc <-> core/err no longer needed: "
                        "delete it from CYCLE_EXCEPTIONS"], problems


def test_model_and_runtime_stay_apart(tmp_path):
    # model/ computes from resolved weights and knows nothing of sharding; zero/ knows nothing of the model
    fails_with_added_include(tmp_path, "model/projector.c", "zero/comm.h",
                             "model -> zero is not allowed (model/ may use: core, io, kernels, audio)")


def test_generation_and_training_share_only_the_session(tmp_path):
    # infer/ opens its model through session/ and knows nothing of training; session/ knows neither of them
    fails_with_added_include(tmp_path, "infer/infer.c", "train/args.h",
                             "infer -> train is not allowed (infer/ may use: core, io, kernels, tokenizer, audio, "
                             "dataset, model, zero, persist, session)")


def test_session_knows_no_training(tmp_path):
    fails_with_added_include(tmp_path, "session/session.c", "train/trainer.h",
                             "session -> train is not allowed (session/ may use: core, io, kernels, audio, dataset, "
                             "model, zero, persist)")


def test_cycle_in_matrix_fails(monkeypatch):
    monkeypatch.setattr(layering, "ALLOWED", dict(layering.ALLOWED, core=["cli"]))
    problems = layering.check(ROOT)
    assert len(problems) == 1 and "ALLOWED has a cycle" in problems[0], problems
