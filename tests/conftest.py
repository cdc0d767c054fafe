import os, pathlib, stat, sys, tempfile
ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / os.environ.get("OMNISHARD_BUILD", "build")
BIN = BUILD / "omnishard"
sys.path.insert(0, str(ROOT / "tests"))

# OMNISHARD_TEST_DEVICE=guard: the whole suite on the guard backend. Every omnishard command a test starts through
# BIN that opens a backend (sft, infer, export, plan, mel --encoder) gets --device guard after the command unless
# it names its own --device: BIN is then a small wrapper around the binary (tests/omni_run.py adds it to sft, infer
# and plan for any OMNISHARD_TEST_DEVICE).
WRAP = """#!/bin/sh
add=
case "$1" in
sft|infer|export|plan) add=1 ;;
mel) for a in "$@"; do [ "$a" = --encoder ] && add=1; done ;;
esac
for a in "$@"; do case "$a" in --device|--device=*) add= ;; esac; done
if [ -n "$add" ]; then c=$1; shift; exec "%s" "$c" --device guard "$@"; fi
exec "%s" "$@"
"""
if os.environ.get("OMNISHARD_TEST_DEVICE") == "guard":
    _wrap_dir = pathlib.Path(tempfile.mkdtemp(prefix="omnishard-guard-"))
    (_wrap_dir / "omnishard").write_text(WRAP % (BIN.resolve(), BIN.resolve()))
    (_wrap_dir / "omnishard").chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    (_wrap_dir / "tests").symlink_to(BUILD.resolve() / "tests")   # the build's test programs beside BIN, as there
    BIN = _wrap_dir / "omnishard"
