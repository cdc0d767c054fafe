"""The device check (tools/device-check.sh, issue 25 item 7) without a GPU: its op-by-op comparison against the guard
backend (every member of the seam, all within tolerance; a wrong result is caught), and the whole script's dry run
(the same stages on the CPU/guard backend with tiny shapes: a broken script fails here, not on the lent machine)."""
import json, os, pathlib, re, signal, subprocess, time

import pytest

from conftest import BUILD, ROOT

OPC = BUILD / "op_compare"


def members():
    """Every member of os_ops, read from src/kernels/ops.h (function pointers and plain fields, name excepted)."""
    src = open(ROOT / "src/kernels/ops.h").read()
    body = src[src.index("typedef struct {"):src.index("} os_ops;")]
    names = set(re.findall(r"\(\*(\w+)\)\(", body)) | set(re.findall(r"^\s+int (\w+);", body, re.M))
    return names


def test_op_compare_checks_every_member_on_the_guard_backend(tmp_path):
    js = tmp_path / "ops.jsonl"
    p = subprocess.run([OPC, "guard", "--json", js], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OMP_NUM_THREADS="2"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    recs = [json.loads(x) for x in open(js)]
    assert recs and all(r["pass"] for r in recs), [r for r in recs if not r["pass"]]
    missing = members() - {r["op"] for r in recs}
    assert not missing, f"members of os_ops with no check in op_compare: {missing}"
    # the odd shapes of the issue are there: T = 1, 7, 1000; a vocabulary no multiple of 8; GQA 14/2; bf16
    shapes = {(r["op"], r["dtype"], r["shape"]) for r in recs}
    for t in (1, 7, 1000):
        assert ("attention_fwd", "fp32", f"B1 T{t} H14/2 D64 causal") in shapes
    assert any(op == "xent_fwd_bwd" and "V1001" in s for op, _, s in shapes)
    assert any(op == "linear_fwd" and dt == "bf16" for op, dt, _ in shapes)
    assert re.search(r"op_compare guard: \d+ checks passed, 0 failed", p.stdout)


def test_op_compare_catches_a_wrong_result():
    p = subprocess.run([OPC, "cpu", "--only", "gemm,elementwise", "--perturb", "gemm"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1, p.stdout
    lines = [l for l in p.stdout.splitlines() if l.split()[:1] in (["gemm"], ["add"], ["axpy"])]
    assert lines and all(l.endswith("FAIL") for l in lines if l.startswith("gemm")), p.stdout
    assert all(" PASS" in l for l in lines if not l.startswith("gemm")), p.stdout


def test_op_compare_names_its_backends():
    p = subprocess.run([OPC, "tpu"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "backend 'tpu'" in p.stdout + p.stderr, p.stdout + p.stderr


def dry_run(out, *args, env=None):
    e = dict(os.environ, OUT=str(out), OMNISHARD_BUILD=str(BUILD))
    e.update(env or {})
    return subprocess.run([ROOT / "tools/device-check.sh", "--dry-run", *args], capture_output=True, text=True,
                          timeout=400, env=e, cwd=ROOT)


def test_dry_run_runs_every_stage(tmp_path):
    p = dry_run(tmp_path)
    res = json.load(open(tmp_path / "results.json"))
    stages = {s["stage"]: s["status"] for s in res["stages"]}
    assert p.returncode == 0 and stages == dict.fromkeys(["setup", "build", "ops", "oracle", "bench"], "PASS"), \
        (stages, p.stdout[-3000:])
    assert res["ops"] and all(o["pass"] for o in res["ops"])
    assert [t["status"] for t in res["oracle"]] == ["PASS", "PASS"], res["oracle"]
    b = res["bench"]
    for side in ("omnishard", "torch_eager"):
        assert b[side]["tokens_per_s"] > 0 and b[side]["mfu"] > 0, b[side]
    # the same model and loss on both sides: the first step's losses agree
    assert abs(b["omnishard"]["losses"][0] - b["torch_eager"]["losses"][0]) < 1e-2 * b["torch_eager"]["losses"][0], b
    report = open(tmp_path / "report.md").read()
    assert "## ops:" in report and "## oracle: 2 of 2 tests passed" in report and "| omnishard |" in report
    assert len(os.listdir(tmp_path)) <= 8   # what the device tool brings back from $OUT


def test_dry_run_reports_a_failed_stage_and_goes_on(tmp_path):
    p = dry_run(tmp_path, "--stages", "ops,bench", env=dict(OMNISHARD_BUILD="build-absent",
                                                              DEVCHECK_BENCH_ARGS="--budget 1"))
    res = json.load(open(tmp_path / "results.json"))
    st = [(s["stage"], s["status"]) for s in res["stages"]]
    assert p.returncode == 1 and st == [("ops", "FAIL"), ("bench", "FAIL")], (st, p.stdout)
    assert "budget left" in res["stages"][1]["note"], res["stages"]
    assert "ops: FAIL" in p.stdout


def test_dry_run_skips_stages_past_the_deadline(tmp_path):
    # a deadline under the 10 s a stage needs at least: every stage is skipped, whatever the machine's speed
    p = dry_run(tmp_path, "--stages", "setup,ops", env=dict(DEVCHECK_DEADLINE="9"))
    res = json.load(open(tmp_path / "results.json"))
    st = {s["stage"]: s["status"] for s in res["stages"]}
    assert p.returncode == 1 and st == {"setup": "SKIPPED", "ops": "SKIPPED"}, (st, p.stdout)


def plan(*mode):
    p = subprocess.run([ROOT / "tools/device-check.sh", *mode, "--budgets"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    rows = [l.split() for l in p.stdout.splitlines()]
    return {k: int(v) for k, v in rows[:-1]}, (rows[-1][0], int(rows[-1][1]))


@pytest.mark.parametrize("mode,limit", [((), 420), (("--quick",), 240), (("--dry-run",), 320),
                                        (("--dry-run", "--quick"), 240)])
def test_stage_budgets_add_up_to_the_deadline(mode, limit):
    """Two runs fit in 15 device-minutes with the machine's start: the full run 420 s at most, --quick 240 s, and
    every stage's budget inside the deadline (a stage never counts on time another one leaves)."""
    budgets, (word, deadline) = plan(*mode)
    assert word == "deadline" and deadline <= limit, (budgets, deadline)
    assert sum(budgets.values()) <= deadline, (budgets, deadline)
    want = ["setup", "build", "ops", "bench"] if "--quick" in mode else ["setup", "build", "ops", "oracle", "bench"]
    assert list(budgets) == want and all(b >= 10 for b in budgets.values()), budgets


def test_dry_run_quick_builds_checks_the_ops_and_runs_one_bench_point(tmp_path):
    p = dry_run(tmp_path, "--quick")
    res = json.load(open(tmp_path / "results.json"))
    stages = {s["stage"]: s["status"] for s in res["stages"]}
    assert p.returncode == 0 and stages == dict.fromkeys(["setup", "build", "ops", "bench"], "PASS"), \
        (stages, p.stdout[-3000:])
    b = res["bench"]
    assert b["omnishard"]["tokens_per_s"] > 0 and len(b["omnishard"]["times"]) == 4, b["omnishard"]
    assert b["torch_eager"] == b["torch_compile"] == "skipped (--sides)", b
    assert res["ops"] and all(o["pass"] for o in res["ops"]) and not res["oracle"]


def test_dry_run_stopped_from_outside_leaves_the_finished_stages_in_the_report(tmp_path):
    """The device tool stops a run at its limit: the stages that ended are in report.md and results.json already."""
    e = dict(os.environ, OUT=str(tmp_path), OMNISHARD_BUILD=str(BUILD))
    p = subprocess.Popen([ROOT / "tools/device-check.sh", "--dry-run", "--stages", "setup,ops,bench"], env=e, cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    res, t0 = None, time.time()
    try:
        while time.time() - t0 < 200 and p.poll() is None:   # until ops has ended (the bench runs then)
            time.sleep(0.5)
            try:
                res = json.load(open(tmp_path / "results.json"))
            except (OSError, ValueError):
                continue
            if any(s["stage"] == "ops" for s in res["stages"]):
                break
        assert p.poll() is None, "the run ended before it could be stopped: " + p.stdout.read()[-3000:]
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    res = json.load(open(tmp_path / "results.json"))
    assert [(s["stage"], s["status"]) for s in res["stages"]] == [("setup", "PASS"), ("ops", "PASS")], res["stages"]
    assert res["ops"] and all(o["pass"] for o in res["ops"])
    report = open(tmp_path / "report.md").read()
    assert "| setup | PASS |" in report and "| ops | PASS |" in report and "## ops:" in report, report
    assert "| bench |" not in report


def test_device_debs_lists_the_build_and_runtime_packages_without_the_base_system():
    """tools/device-debs.sh --list (no download): the -dev packages make needs, the libraries they load at run time
    (Open MPI's plugins' too), and none of the base system's (the lent machine's newer copies stay in use)."""
    p = subprocess.run([ROOT / "tools/device-debs.sh", "--list"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    pkgs = set(p.stdout.split())
    want = {"libopenmpi-dev", "openmpi-bin", "libopenmpi3", "libopenblas-pthread-dev", "libopenblas0-pthread",
            "libdnnl-dev", "libdnnl2", "libcjson-dev", "libcjson1", "libpcre2-dev", "libpcre2-8-0", "libsndfile1-dev",
            "libsndfile1", "libhwloc15", "libgfortran5", "make"}
    assert want <= pkgs, want - pkgs
    assert not pkgs & {"libc6", "libstdc++6", "libgcc-s1", "zlib1g", "libgomp1"}, pkgs


CUDA_OPC = ROOT / os.environ.get("OMNISHARD_CUDA_BUILD", "build-cuda") / "op_compare"


def test_op_compare_of_the_cuda_build_without_a_gpu_says_why(tmp_path):
    """make CUDA=1 (CI: make CUDA=1 cuda) links op_compare with the CUDA backend; on a machine without a GPU it
    opens no backend and says so with CUDA's error, one FAIL line, exit status 1 (on the lent GPU: tools/device-check.sh)."""
    if not CUDA_OPC.exists():
        pytest.skip(f"the no-GPU check of the CUDA build needs {CUDA_OPC}: build it with `make CUDA=1 cuda` (no GPU needed)")
    if any(pathlib.Path("/dev").glob("nvidia[0-9]*")):
        pytest.skip("a GPU is present, and this checks the CUDA build on a machine without one (with a GPU, tools/device-check.sh runs op_compare cuda)")
    p = subprocess.run([CUDA_OPC, "cuda", "--json", tmp_path / "o.jsonl"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "op_compare cuda: 0 checks passed, 1 failed" in p.stdout, p.stdout + p.stderr
    assert "backend 'cuda'" in p.stderr and "CUDA" in p.stderr, p.stderr
    assert json.loads(open(tmp_path / "o.jsonl").read())["op"] == "(backend)"
