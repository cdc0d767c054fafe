"""The OMNISHARD_* variables (src/core/knobs.c, docs/operations.md "Environment variables"): read once, checked
before any command starts (every bad value named at once, exit 2), and listed in the run's start-up settings."""
import json
import os
import re
import subprocess
from pathlib import Path

from conftest import BIN
from omni_run import run, tiny_slam


def bare_env(**kv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNISHARD_") or k == "OMNISHARD_BUILD"}
    env.update(kv)
    return env


def test_bad_values_stop_every_command_at_start(tmp_path):
    """before, tokenize never looked at OMNISHARD_LOGITS_ROWS or OMNISHARD_FAULT, a bad OMNISHARD_LOG_SAMPLES
    meant 'off', and the kernel that read OMNISHARD_LOGITS_ROWS stopped the program from inside a step"""
    env = bare_env(OMNISHARD_LOGITS_ROWS="many", OMNISHARD_LOG_SAMPLES="yes", OMNISHARD_FAULT="1",
                   OMNISHARD_TOK_RANGES="2")
    for cmd in (["tokenize", "--tokenizer", str(tmp_path / "none.json")], ["plan", "--model", "qwen2.5-0.5b"]):
        p = subprocess.run([str(BIN), *cmd], capture_output=True, text=True, env=env, timeout=60, input="")
        assert p.returncode == 2, (cmd, p.returncode, p.stderr)
        for part in ("OMNISHARD_LOGITS_ROWS: expected a positive number of rows (a test hook), got 'many'",
                     "OMNISHARD_LOG_SAMPLES: expected 1", "got 'yes'", "OMNISHARD_FAULT: expected RANK:STEP",
                     "OMNISHARD_TOK_RANGES: expected 1"):
            assert part in p.stderr, (cmd, p.stderr)
        assert "none.json" not in p.stderr and p.stdout == "", p.stdout + p.stderr


def test_the_run_lists_the_variables_set(tmp_path_factory):
    d = tiny_slam(tmp_path_factory, "knobs", 2)
    p = run(["sft", "--model", d / "model", "--dataset", d / "data.jsonl", "--output_dir", d / "o", "--max_steps", 1],
            env={"OMNISHARD_LOG_SAMPLES": "1", "OMNISHARD_LOGITS_ROWS": "4"}, timeout=120)
    assert "environment settings:" in p.stderr and "OMNISHARD_LOG_SAMPLES=1" in p.stderr and \
        "OMNISHARD_LOGITS_ROWS=4" in p.stderr, p.stderr
    env = json.load(open(d / "o" / "args.json"))["resolved"]["environment"]
    assert env["OMNISHARD_LOG_SAMPLES"] == "1" and env["OMNISHARD_LOGITS_ROWS"] == "4", env


ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
KNOBS = SRC / "core" / "knobs.c"
# The environment is read in core/knobs.c only, but for these variables of the launcher, the CUDA runtime and
# OpenBLAS, read where they are used (file -> the exact calls allowed there, each with its reason):
ALLOWED = {
    # the job's rank for the MPI_Init/MPI_Finalize deadline's message: MPI cannot be asked inside MPI_Init
    "zero/phase_deadline.c": {'getenv("OMPI_COMM_WORLD_RANK")', 'getenv("PMIX_RANK")'},
    # the rank's GPU by its local rank (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID: the names
    # listed beside the call), and CUDA_VISIBLE_DEVICES named in the messages when no GPU is usable
    "cuda/cu_runtime.c": {"getenv(names[i])", 'getenv("CUDA_VISIBLE_DEVICES")'},
    # an explicit OPENBLAS_CORETYPE is the user's: the SkylakeX fix is not applied over it
    "core/cpu.c": {'getenv("OPENBLAS_CORETYPE")'},
}
READ = re.compile(r"\b(?:secure_)?getenv\s*\([^()]*(?:\([^()]*\)[^()]*)*\)")


def sources():
    return sorted(p for p in SRC.rglob("*") if p.suffix in (".c", ".h", ".cu", ".cuh", ".cpp"))


def reads_of(text):
    """each getenv/secure_getenv call of a C text, comments left out, spaces squeezed"""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    return [re.sub(r"\s+", "", m.group(0)) for m in READ.finditer(text)]


def knob_table():
    """the names of knobs.c's tables: the variables read (NAMES) and those that became options (RETIRED)"""
    text = KNOBS.read_text()
    names = re.search(r"NAMES\[\]\s*=\s*\{(.*?)\};", text, re.S).group(1)
    retired = re.search(r"RETIRED\[\]\[2\]\s*=\s*\{(.*?)\n\};", text, re.S).group(1)
    return set(re.findall(r'"(OMNISHARD_[A-Z0-9_]+)"', names)), set(re.findall(r'\{"(OMNISHARD_[A-Z0-9_]+)"', retired))


def test_the_environment_is_read_in_knobs_c_only():
    """getenv/secure_getenv appear in core/knobs.c and, elsewhere, only as the allowed calls above"""
    stray = []
    for p in sources():
        rel = str(p.relative_to(SRC))
        if rel == "core/knobs.c":
            continue
        stray += [f"src/{rel}: {c}" for c in reads_of(p.read_text()) if c not in ALLOWED.get(rel, set())]
    assert not stray, "read the variable in src/core/knobs.c (os_knobs) and hand it on:\n" + "\n".join(stray)
    for rel, calls in ALLOWED.items():   # the allow-list stays what the code does
        assert set(reads_of((SRC / rel).read_text())) == calls, (rel, reads_of((SRC / rel).read_text()))


def test_the_check_sees_a_new_read(tmp_path):
    """the scan above finds a read however it is spelt (so the test fails when someone adds one)"""
    for text in ('x = getenv("OMNISHARD_NEW");', "const char *v = secure_getenv ( name );", "getenv(\n  k[i])"):
        assert reads_of(text), text
    assert not reads_of('// getenv("X") in a comment\n/* secure_getenv(y) */')


def test_every_omnishard_name_in_src_is_in_the_table():
    names, retired = knob_table()
    assert names and retired and not names & retired, (names, retired)
    used = set()
    for p in sources():
        used |= set(re.findall(r"\bOMNISHARD_[A-Z0-9][A-Z0-9_]*[A-Z0-9]\b", p.read_text()))
    assert used - names - retired == set(), "OMNISHARD_* names in src/ that core/knobs.c does not list"


def test_every_knob_has_a_row_with_its_reason():
    """docs/operations.md's table: a row per variable read, with why it is not an option; each retired variable
    is named there with its option"""
    names, retired = knob_table()
    doc = (ROOT / "docs" / "operations.md").read_text()
    section = doc[doc.index("## Environment variables"):]
    section = section.split("\n## ")[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `OMNISHARD_"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            for n in re.findall(r"`(OMNISHARD_[A-Z0-9_]+)`", cells[0]):
                rows[n] = cells
    assert set(rows) == names, (set(rows) ^ names)
    assert all(len(c) == 5 and c[4] for c in rows.values()), [n for n, c in rows.items() if len(c) != 5 or not c[4]]
    for n in retired:
        assert f"`{n}`" in section, n


def test_a_retired_variable_stops_every_command_naming_its_option(tmp_path):
    env = bare_env(OMNISHARD_HEAD_BALANCE="0")
    for cmd in (["tokenize", "--tokenizer", str(tmp_path / "none.json")], ["plan", "--model", "qwen2.5-0.5b"],
                ["sft", "--model", str(tmp_path), "--dataset", "d.jsonl", "--output_dir", str(tmp_path / "o")]):
        p = subprocess.run([str(BIN), *cmd], capture_output=True, text=True, env=env, timeout=60, input="")
        assert p.returncode == 2, (cmd, p.returncode, p.stderr)
        assert "OMNISHARD_HEAD_BALANCE: no longer read (got '0'): it is the option --head_balance" in p.stderr, p.stderr
        assert not (tmp_path / "o").exists()
