import os, pathlib, sys
ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / os.environ.get("OMNISHARD_BUILD", "build")
BIN = BUILD / "omnishard"
sys.path.insert(0, str(ROOT / "tests"))
