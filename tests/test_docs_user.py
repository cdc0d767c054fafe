"""The user docs speak to users: README.md and docs/*.md (docs/spec/*.md for issue numbers) hold no internal issue
numbers and no changelog notes ("before, ...", "previously", "no longer ..."): they say what omnishard does now,
and the history lives in git and docs/design-log.md (excluded). Each pattern below is one way a changelog note
or a tracker reference reads; the few sentences where such words say something about the present (the decoder
"no longer predicts" the text after eot) are listed in EXCEPTIONS, each by a phrase of its own line."""
import json, os, re, shlex, subprocess, sys

import pytest

from conftest import ROOT

HISTORY = {"docs/design-log.md"}   # the record of what was done when: history belongs there


def user_docs():
    files = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    return [f for f in files if str(f.relative_to(ROOT)) not in HISTORY]


# a reference to the project's tracker: "issue 12", "issues 9, 11", "issue #31", "(#31)", "session 4"
TRACKER = [
    re.compile(r"\bissues?\s*#?\d+", re.I),
    re.compile(r"\bsessions?\s+\d+\b", re.I),
    re.compile(r"(?<![\w`/#&.-])#\d+\b"),         # "#31" in prose; not PATH#N, a.jsonl#20000, `#380` in a message
]
# a changelog note: how it was before rather than how it is
CHANGELOG = [
    re.compile(r"(?:^|[.;:!?]\s+|\(\s*)before,\s", re.I | re.M),   # "Before, each chunk ..." / "(before, rank 0 ...)"
    re.compile(r"\bpreviously\b", re.I),
    re.compile(r"\bformerly\b", re.I),
    re.compile(r"\buntil now\b", re.I),
    re.compile(r"\(was:?\s", re.I),                                    # "(was: 152000 written ...)"
    re.compile(r"(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bbeen )(?<!\bwas )(?<!\bwere )\bused to\b", re.I),
    re.compile(r"\bnow\b[^.;]{0,60}\binstead of\b", re.I),           # "now gathers X instead of Y"
    re.compile(r"\bno longer\b", re.I),
]
# (file, a phrase of the line): present-tense uses of the words above
EXCEPTIONS = {
    ("docs/inference.md", "A recorded encoder that is no longer there"),        # a file removed since training
    ("docs/inference.md", "the text is no longer predicted"),                    # the decoding rule after eot
    ("docs/inference.md", "the audio is no longer predicted"),                   # ... and after eoa
    ("docs/operations.md", "which can no longer reach mpirun"),                 # a host cut off from the launcher
    ("docs/operations.md", "keepalive no longer applies"),                      # TCP once data is unacknowledged
}


def prose(text):
    """The text without code: fenced blocks, indented blocks (4 spaces after a blank line) and `code spans` (error
    messages quoted there may say 'now' or '#380'), each replaced by blanks so that line numbers stay."""
    text = re.sub(r"^```.*?^```", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S | re.M)
    text = re.sub(r"(?:(?<=\n\n)|^)(?: {4}.*\n?)+", lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    return re.sub(r"`[^`]*`", lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def hits(path, text, patterns, lines):
    out = []
    for pat in patterns:
        for m in pat.finditer(text):
            n = text.count("\n", 0, m.start())
            line = lines[n]
            if any(f == path and phrase in line for f, phrase in EXCEPTIONS):
                continue
            out.append(f"{path}:{n + 1}: '{m.group().strip()}' in: {line.strip()}")
    return out


def test_user_docs_name_no_issue_numbers_and_carry_no_changelog_notes():
    found = []
    for f in user_docs():
        rel = str(f.relative_to(ROOT))
        text = f.read_text()
        lines = text.split("\n")
        found += hits(rel, text, TRACKER[:2], lines) + hits(rel, prose(text), TRACKER[2:] + CHANGELOG, lines)
    for f in sorted((ROOT / "docs" / "spec").glob("*.md")):
        text = f.read_text()
        found += hits(str(f.relative_to(ROOT)), text, TRACKER[:2], text.split("\n"))
    assert not found, ("user docs say what omnishard does, not which issue changed it or how it was before "
                       "(history: git, docs/design-log.md); rephrase, or list a present-tense use in EXCEPTIONS:\n"
                       + "\n".join(found))


def test_every_exception_is_still_used():
    """An exception whose line is gone is dropped, so the list stays the set of real present-tense uses."""
    for rel, phrase in EXCEPTIONS:
        assert phrase in (ROOT / rel).read_text().replace("\n", " "), (rel, phrase)


@pytest.mark.parametrize("text, flagged", [
    ("see issue 12's model", True), ("(issues 9, 11)", True), ("fixed in #31.", True), ("in session 4", True),
    ("Before, each chunk was rounded twice.", True), ("(before, rank 0 read the log)", True),
    ("it used to round twice", True), ("omnishard no longer hangs", True), ("it now reads X instead of Y", True),
    ("(was: 152000)", True), ("as before, the same bits", False), ("run `mpirun` before, not after", False),
    ("a.jsonl#20000 and PATH#N", False), ("the reduce-scatter `#380` at step 27", False),
    ("the tensor is used to compute", False), ("the item 2 of the list", False), ("the sessions' lock", False),
])
def test_the_patterns_flag_changelog_notes_and_spare_plain_text(text, flagged):
    """The patterns can fail: each phrase above is (or is not) flagged, as its comment in the tables says"""
    found = hits("x.md", text, TRACKER[:2], [text]) + hits("x.md", prose(text), TRACKER[2:] + CHANGELOG, [text])
    assert bool(found) == flagged, (text, found)


def test_make_test_says_why_tests_were_skipped(tmp_path):
    """make test's pytest line (make -n) run on a test that skips: the summary names it with its reason"""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}   # under make test
    p = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    line = next(l for l in p.stdout.splitlines() if " -m pytest " in l and l.rstrip().endswith(" tests"))
    flags = shlex.split(line.split(" -m pytest ", 1)[1])[:-1]
    (tmp_path / "test_needs.py").write_text('import pytest\n\ndef test_a():\n    pytest.skip("needs a thing: install it")\n')
    r = subprocess.run([sys.executable, "-m", "pytest", *flags, "-p", "no:cacheprovider", "test_needs.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "SKIPPED" in r.stdout and "test_needs.py" in r.stdout and "needs a thing: install it" in r.stdout, (flags, r.stdout)


def readme_use_line():
    """the sft line of README.md's "Use" example, as arguments"""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("\n## Use\n", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    text = re.sub(r"\\\n\s*", " ", block)
    line = next(l for l in text.splitlines() if " build/omnishard sft " in l)
    return shlex.split(line.split(" build/omnishard sft ", 1)[1])


def test_the_readme_use_line_plans_as_it_is(tmp_path):
    """The README's "Use" line is a valid sft line: plan takes it unchanged (the model directory a small stand-in
    of the Qwen2 download it names, whisper-small the preset), on the line's 8 ranks"""
    from oracle import slam_samples_ref as sref
    args = readme_use_line()
    i = args.index("--model")
    model = tmp_path / args[i + 1]
    sref.make_model_dir(str(model), T=512, A=80, G=3, hidden=32, layers=2, heads=4, kv_heads=2, inter=64, ckpt_vocab=400)
    json.dump({"padded_text_vocabsize": 512, "padded_audio_vocabsize": 80, "projector_hidden": 24},
              open(model / "slam_omni.json", "w"))
    args[i + 1] = str(model)
    from omni_run import run
    out = run(["plan", *args, "--nproc", 8]).stdout
    assert "ranks 8  max_length 3072  batch 3" in out and "speech encoder whisper-small" in out, out
    assert re.search(r"^3 +yes ", out, re.M), out      # --deepspeed zero3, with recomputation (the default)
    for flag in ("--max_steps", "--lr_scheduler_type", "--warmup_steps", "--learning_rate"):
        assert flag in args, flag     # the reference's schedule, which the README explains


SUMMARY_AND_LOG = ("docs/performance.md", "bench/NOTES.md")


def headings(rel):
    return [re.sub(r"^#+\s*", "", l).strip().replace("`", "") for l in (ROOT / rel).read_text().splitlines()
            if l.startswith("#")]


def section_refs(text, doc):
    """the section titles quoted after a mention of doc: 'doc "Title"', 'doc, "Title"', 'doc ("A", "B")', across a
    line break and a comment's leading // or #"""
    flat = re.sub(r"\s*\n\s*(?://|#)?\s*", " ", text)
    out = [m.group(1) for m in re.finditer(re.escape(doc) + r",?\s*\"([^\"]+)\"", flat)]
    for m in re.finditer(re.escape(doc) + r"\s*\((\"[^)]*)\)", flat):
        out += re.findall(r"\"([^\"]+)\"", m.group(1))
    return [t.replace("`", "") for t in out]


def test_every_section_named_in_the_performance_summary_or_the_log_exists():
    """docs/performance.md (the current figures) and bench/NOTES.md (the dated log) are linked by section title
    from the docs, the sources, the benches and the tools: each title names a heading there (its start)"""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    bad, seen = [], 0
    for f in files:
        if not f.endswith((".md", ".c", ".h", ".cu", ".cuh", ".py", ".sh")) or not (ROOT / f).is_file() \
                or f == "tests/test_docs_user.py":   # this file's examples of references
            continue
        text = (ROOT / f).read_text(errors="replace")
        for doc in SUMMARY_AND_LOG:
            for title in section_refs(text, doc):
                seen += 1
                if not any(h.startswith(title) for h in headings(doc)):
                    bad.append(f"{f}: {doc} \"{title}\"")
    assert seen > 20 and not bad, bad


def test_a_missing_section_is_found():
    refs = section_refs('see docs/performance.md, "Packing", and bench/NOTES.md ("Device check", "No such\n'
                        '// section")', "bench/NOTES.md") + section_refs('docs/performance.md, "Packing"', "docs/performance.md")
    assert refs == ["Device check", "No such section", "Packing"], refs
    assert not any(h.startswith("No such section") for h in headings("bench/NOTES.md"))


def test_the_docs_say_not_yet_run_on_a_gpu_until_a_device_report_exists():
    """While docs/performance.md "Device check" has no figures, every place that offers the CUDA backend says it has
    not yet run on a GPU: the README's make CUDA=1 line and its Devices paragraph, docs/operations.md "GPUs" and its
    NCCL part"""
    perf = (ROOT / "docs" / "performance.md").read_text().split("\n## Device check", 1)[1]
    if "| omnishard | not yet run |" not in perf:
        pytest.skip("a device report exists: docs/performance.md \"Device check\" has figures")
    readme = (ROOT / "README.md").read_text()
    make_line = next(l for l in readme.splitlines() if l.startswith("make CUDA=1"))
    devices = readme.split("**Devices:", 1)[1].split("\n\n", 1)[0]
    ops = (ROOT / "docs" / "operations.md").read_text()
    gpus = ops.split("\n## GPUs", 1)[1].split("\n## ", 1)[0]
    nccl = gpus.split("\n### GPUs: several ranks and nodes", 1)[1]
    for where, text in (("README make CUDA=1 line", make_line), ("README Devices", devices),
                        ("operations.md GPUs", gpus.split("\n\n", 2)[1]), ("operations.md NCCL", nccl[:400])):
        assert "not yet run on a gpu" in " ".join(text.split()).lower(), (where, text[:300])


def test_the_ms_swift_habits_table_names_tests_that_exist():
    """docs/training.md "Coming from ms-swift": one row per habit, each naming the test that keeps it true; every
    file named there exists and every test function named there is defined in it"""
    doc = (ROOT / "docs" / "training.md").read_text()
    part = doc.split("\n## Coming from ms-swift", 1)[1].split("\n## ", 1)[0]
    rows = [l for l in part.splitlines() if l.startswith("| ") and not l.startswith("| you do") and "---" not in l]
    assert len(rows) >= 15, len(rows)
    for row in rows:
        tests = re.findall(r"tests/([\w/]+\.py)(?:::(\w+))?", row.rsplit("|", 2)[1])
        assert tests, row
        for path, func in tests:
            text = (ROOT / "tests" / path).read_text()
            assert not func or re.search(rf"^def {func}\b", text, re.M), (path, func)
