#!/usr/bin/env bash
# The device check (issue 25 item 7; docs/performance.md "Device check"): one command that a session with a lent GPU
# machine runs, end to end in under 7 minutes (--quick: 4), writing its report to $OUT:
#   setup   the machine (OS, GPU, nvcc, gcc, Python packages) and the carried dependencies: .debs/*.deb unpacked
#           with dpkg-deb -x into .debs/root (never onto /; tools/device-debs.sh fetched them), .whl/*.whl installed
#           with pip --target; the folders found through PATH, CPATH, LIBRARY_PATH, LD_LIBRARY_PATH, OPAL_PREFIX
#   build   make CUDA=1 cuda with the machine's nvcc (BUILD=build-cuda: the binary, op_compare, tests/cuda/)
#   ops     every seam op, the CUDA backend against the CPU backend (BUILD/op_compare cuda: odd shapes, fp32 and bf16,
#           tolerances in tests/device/op_compare.c), then the CUDA backend's own tests (BUILD/tests/cuda/test_*)
#   oracle  the oracle tests on the GPU (omnishard runs with --device cuda: OMNISHARD_TEST_DEVICE, tests/omni_run.py):
#           10 tests, each promise once: 3 AdamW steps at G = 1, 3, speech input, LoRA against PEFT, 2 ranks sharing
#           the GPU at ZeRO 1 and 3 == 1, a checkpoint moved GPU -> CPU and back, a non-finite stop, the bf16 gather
#   bench   Qwen2.5-0.5B shapes, 24 layers, V 156160, G 3, seq 2048, bf16, 1 GPU: omnishard vs PyTorch eager and
#           torch.compile, MFU against a bf16 GEMM measured in the same run (bench/bench_device.py)
# Each stage has its own time budget, and the budgets add up to the run's deadline (420 s; --quick 240 s), so that
# two runs fit in 15 device-minutes with the machine's start; a stage that fails or runs out of time is reported as
# such and the next one still runs. $OUT gets report.md, results.json (both rewritten as each stage ends, so a run
# stopped from outside still returns the stages that finished) and one log per stage (7 files).
# Exit status: 0 when every stage passed, 1 otherwise.
#
# usage: tools/device-check.sh [--dry-run] [--quick] [--stages setup,build,ops,oracle,bench] [--budgets]
#   --quick: setup, a build for sm_90 only (CUDA_ARCH), ops, one bench point (omnishard and the GEMM rate, 4 steps)
#   --budgets: print each stage's budget and the deadline of the mode chosen (nothing runs)
#   --dry-run: the same stages here, without a GPU: nothing unpacked (the machine's own libraries), the plain build
#   (make, BUILD=$OMNISHARD_BUILD or build), ops against the guard backend (--device guard), the bench on
#   the CPU with a 2-layer model, two oracle tests on the guard backend. tests/test_device_check.py runs it.
# Environment: OUT (default ./device-check-out), DEVCHECK_DEADLINE (seconds, default the mode's: 420, --quick 240,
#   dry run 320, dry --quick 240), DEVCHECK_CUDA_ARCH (the --quick build's CUDA_ARCH, default sm_90),
#   DEVCHECK_BENCH_ARGS (more bench/bench_device.py options, e.g. "--batch 4").
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DRY=0 QUICK=0 PRINT=0
STAGES=
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY=1 ;;
        --quick) QUICK=1 ;;
        --budgets) PRINT=1 ;;
        --stages) STAGES=$2; shift ;;
        *) echo "usage: tools/device-check.sh [--dry-run] [--quick] [--stages setup,build,ops,oracle,bench] [--budgets]" >&2
           exit 2 ;;
    esac
    shift
done
# the plan of each mode: the stages in order with their budgets (seconds), and the deadline they add up to (at most)
# full: correctness first; if the machine is slower than planned, the bench's torch.compile side (half of what the
# bench is left) is what shrinks. --quick: no oracle, the build for one architecture, one bench point.
case $DRY$QUICK in
    00) PLAN="setup:30 build:120 ops:40 oracle:90 bench:140"; DEFAULT_DEADLINE=420 ;;
    01) PLAN="setup:30 build:80 ops:40 bench:90"; DEFAULT_DEADLINE=240 ;;
    10) PLAN="setup:30 build:60 ops:40 oracle:90 bench:100"; DEFAULT_DEADLINE=320 ;;
    11) PLAN="setup:30 build:60 ops:40 bench:100"; DEFAULT_DEADLINE=240 ;;
esac
if [ "$PRINT" = 1 ]; then
    for sb in $PLAN; do echo "${sb%%:*} ${sb#*:}"; done
    echo "deadline $DEFAULT_DEADLINE"
    exit 0
fi
if [ -z "$STAGES" ]; then
    STAGES=$(for sb in $PLAN; do printf '%s,' "${sb%%:*}"; done)
fi
export OUT=${OUT:-$ROOT/device-check-out}
mkdir -p "$OUT" || exit 2
WORK=$(mktemp -d /tmp/device-check.XXXXXX)
export WORK DRY QUICK ROOT
START=$(date +%s)
DEADLINE=${DEVCHECK_DEADLINE:-$DEFAULT_DEADLINE}
if [ "$DRY" = 1 ]; then
    export BUILD=${OMNISHARD_BUILD:-build} DEVICE=guard PY=${PY:-$ROOT/.venv/bin/python} JOBS=2
else
    export BUILD=build-cuda DEVICE=cuda PY=${PY:-python3} JOBS=$(nproc)
fi
: > "$WORK/stages.tsv"

# ---- the stages (each runs in its own bash under a timeout, its output into $OUT/NAME.log) ----
stage_setup() {
    set -x
    date -u; uname -a; grep PRETTY /etc/os-release; nproc; free -g | head -2
    command -v nvidia-smi >/dev/null && nvidia-smi
    for t in gcc make nvcc mpicc mpirun dpkg-deb python3 "$PY"; do printf '%s: %s\n' "$t" "$(command -v "$t" || echo missing)"; done
    gcc --version | head -1
    "$PY" -c 'import sys, torch, transformers; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available() and torch.cuda.get_device_name(0))'
    set +x
    : > "$WORK/env.sh"
    if [ "$DRY" = 1 ]; then
        for t in mpicc mpirun make; do command -v $t >/dev/null || { echo "devcheck: $t missing"; return 1; }; done
        echo "devcheck: dry run: the machine's own libraries and tools"
        return 0
    fi
    # the carried Debian packages, unpacked into the checkout
    local R=$ROOT/.debs/root A=x86_64-linux-gnu
    ls .debs/*.deb >/dev/null 2>&1 || { echo "devcheck: no .debs/*.deb: run tools/device-debs.sh and carry .debs"; return 1; }
    rm -rf "$R" && mkdir -p "$R"
    for f in .debs/*.deb; do
        dpkg-deb -x "$f" "$R" || { echo "devcheck: dpkg-deb -x $f failed"; return 1; }
    done
    # the links their maintainer scripts would make: the sonames (ldconfig -n), the alternatives' names
    local libdirs
    libdirs=$(find "$R" -name '*.so*' -type f -printf '%h\n' | sort -u | tr '\n' ' ')
    # shellcheck disable=SC2086
    "$(command -v ldconfig || echo /sbin/ldconfig)" -n $libdirs
    mkdir -p "$R/links"
    ln -sf "$R/usr/bin/mpicc.openmpi" "$R/links/mpicc"; ln -sf "$R/usr/bin/mpirun.openmpi" "$R/links/mpirun"
    ln -sf "$R/usr/bin/mpiexec.openmpi" "$R/links/mpiexec"
    local ldp path=$R/links
    ldp=$(echo "$libdirs" | tr ' ' ':')
    command -v make >/dev/null || path=$path:$R/usr/bin
    # the CUDA toolkit, cuBLAS and NCCL of the machine (the image's toolkit, else PyTorch's pip packages)
    local nvcc cuda_home site
    nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
    [ -n "$nvcc" ] || { echo "devcheck: no nvcc on PATH or in /usr/local/cuda/bin"; return 1; }
    cuda_home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
    site=$("$PY" -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)
    {
        echo "export PATH=$path:$(dirname "$nvcc"):\$PATH"
        echo "export OPAL_PREFIX=$R/usr"
        echo "export CPATH=$R/usr/include:$R/usr/include/$A:$R/usr/include/$A/openblas-pthread:$R/usr/lib/$A/openmpi/include"
        echo "export LIBRARY_PATH=$R/usr/lib/$A:$R/usr/lib/$A/openblas-pthread:$R/usr/lib/$A/openmpi/lib"
        echo "export CUDA_HOME=$cuda_home"
        [ -f "$cuda_home/include/cublasLt.h" ] || echo "export CUBLAS_INC=$(dirname "$(find "$site/nvidia" -name cublasLt.h | head -1)")"
        [ -f "$cuda_home/include/nccl.h" ] || echo "export NCCL_INC=$(dirname "$(find "$site/nvidia" -name nccl.h | head -1)")"
        # cuBLASLt and NCCL at run time: the toolkit's, then PyTorch's wheels
        echo "export LD_LIBRARY_PATH=$ldp:$cuda_home/lib64:$(find "$site/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')\${LD_LIBRARY_PATH:-}"
        echo "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_base_warn_component_unused=0"
    } > "$WORK/env.sh"
    if ls .whl/*.whl >/dev/null 2>&1; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" .whl/*.whl || return 1
        echo "export PYTHONPATH=$WORK/site\${PYTHONPATH:+:\$PYTHONPATH}" >> "$WORK/env.sh"
    else
        echo "devcheck: no .whl/*.whl (the speech oracle needs openai-whisper): run tools/device-debs.sh and carry .whl"
    fi
    cat "$WORK/env.sh"
    # shellcheck disable=SC1091
    . "$WORK/env.sh"
    mpicc -showme && mpirun --version | head -1 || return 1
    # PyTorch still loads with the carried libraries on LD_LIBRARY_PATH (the oracle and the bench need it)
    "$PY" -c 'import torch, transformers, whisper; torch.zeros(1, device="cuda"); print("torch with the carried libraries: ok")' \
        || { echo "devcheck: python3 fails with the carried libraries on LD_LIBRARY_PATH"; return 1; }
}

stage_build() {
    local args=(-j"$JOBS" BUILD="$BUILD")
    # what the stages run (not the unit tests): the binary and op_compare; on the GPU `cuda`, which adds the CUDA
    # backend's own tests (tests/cuda/)
    if [ "$DRY" = 1 ]; then args+=("$BUILD/omnishard" "$BUILD/op_compare"); else args+=(CUDA=1 cuda); fi
    # --quick: the lent GPUs' architecture only (H100 and H200: sm_90): no sm_80 code, no PTX
    [ "$QUICK" = 1 ] && [ "$DRY" = 0 ] && args+=("CUDA_ARCH=${DEVCHECK_CUDA_ARCH:--gencode arch=compute_90,code=sm_90}")
    echo "\$ make ${args[*]}"
    make "${args[@]}" || return 1
    [ -x "$BUILD/op_compare" ] || { echo "devcheck: $BUILD/op_compare was not built"; return 1; }
    if ldd "$BUILD/omnishard" | grep "not found"; then echo "devcheck: libraries not found"; return 1; fi
    "$BUILD/omnishard" sft --help > /dev/null || { echo "devcheck: $BUILD/omnishard does not start"; return 1; }
}

stage_ops() {
    if [ "$DRY" = 1 ]; then   # a part of the list here (all of it against guard: tests/test_device_check.py)
        "$BUILD/op_compare" guard --json "$WORK/ops.jsonl" --only memory,zero_copy,gemm,bf16,xent,elementwise
    else   # then the CUDA backend's own tests on the GPU (tests/cuda/test_*.c: the products against their definition)
        local rc=0 t
        "$BUILD/op_compare" "$DEVICE" --json "$WORK/ops.jsonl" || rc=1
        for t in "$BUILD"/tests/cuda/test_*; do
            echo "\$ $t"
            "$t" || { rc=1; echo "devcheck: $t failed"; }
        done
        return $rc
    fi
}

stage_bench() {
    local budget=$1
    local args=(--build "$BUILD" --out "$WORK/bench.json" --work "$WORK" --cache "$WORK/cache" --budget "$((budget - 10))")
    if [ "$DRY" = 1 ]; then args+=(--device cpu --tiny --seq 64 --steps 3 --compile_budget 0)
    else args+=(--device cuda --compile_budget "$((budget / 2))"); fi
    [ "$QUICK" = 1 ] && args+=(--sides gemm,omnishard --steps 4)   # one point: omnishard's step and MFU
    # shellcheck disable=SC2086
    "$PY" bench/bench_device.py "${args[@]}" ${DEVCHECK_BENCH_ARGS:-}
}

stage_oracle() {
    local sel
    if [ "$DRY" = 1 ]; then
        sel=("tests/test_train_oracle.py::test_matches_pytorch[g1_untied_accum2]"
             "tests/test_zero_equivalence.py::test_n_ranks_equal_accumulation[tied-3-2]")
        export OMNISHARD_TEST_DEVICE=guard
    else
        # what fits 90 s (4 workers): each promise once, the GPU's own risks first (a stage stopped at its budget
        # still reports the tests that ended). The oracle at G = 3 and G = 1 (the adapter's and the plain head's
        # paths; G = 0 runs the same kernels), speech input, LoRA against PEFT, 2 ranks sharing the GPU at ZeRO 1
        # and 3 (the reduce-scatter and the gathered parameters; 0 and 2 add no device code), a checkpoint moving
        # between the GPU and the CPU, a non-finite stop, the bf16 gather, the transport said once. Left to the CPU
        # suite (host logic, the same on every backend): resume at another rank count, dropout under N ranks,
        # weights overflowing in the update, the forced-NCCL refusals.
        sel=("tests/test_train_oracle.py::test_matches_pytorch[g3_tied_batch2]"
             "tests/test_train_oracle.py::test_matches_pytorch[g1_untied_accum2]"
             "tests/test_speech_train.py::test_speech_step_matches_pytorch" "tests/test_lora.py::test_lora_matches_peft"
             "tests/test_zero_equivalence.py::test_n_ranks_equal_accumulation[tied-3-2]"
             "tests/test_zero_equivalence.py::test_n_ranks_equal_accumulation[tied-1-2]"
             "tests/test_cross_device.py::test_checkpoint_moves_between_the_device_and_the_cpu"
             "tests/test_nonfinite.py::test_huge_learning_rate_stops_naming_step_and_parameter"
             "tests/test_bf16.py::test_zero3_bf16_exact_gather_of_a_bf16_bucket"
             "tests/test_comm_transport.py::test_two_ranks_say_their_transport_once")
        export OMNISHARD_TEST_DEVICE=cuda
        "$PY" -c 'import xdist' 2>/dev/null && sel+=(-n 4)
    fi
    # -v: a line per test as it ends, so a stage stopped at its budget (no junit file then) still shows which passed
    OMNISHARD_BUILD=$BUILD PYTHONUNBUFFERED=1 "$PY" -m pytest -v -p no:cacheprovider --junitxml="$WORK/oracle.xml" "${sel[@]}"
}
export -f stage_setup stage_build stage_ops stage_bench stage_oracle

run_stage() {   # NAME BUDGET: runs stage_NAME within min(BUDGET, the time left), records its outcome
    local name=$1 cap=$2 left t0 rc status note
    case ",$STAGES," in *",$name,"*) ;; *) return ;; esac
    left=$((DEADLINE - ($(date +%s) - START)))
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -lt 10 ]; then
        printf '%s\tSKIPPED\t0\t%s\n' "$name" "no time left before the ${DEADLINE} s deadline" >> "$WORK/stages.tsv"
        return
    fi
    echo "== $name (budget ${cap} s)"
    t0=$(date +%s)
    # shellcheck disable=SC1091
    timeout -k 10 "$cap" bash -c ". '$WORK/env.sh' 2>/dev/null; stage_$name $cap" > "$OUT/$name.log" 2>&1
    rc=$?
    case $rc in
        0) status=PASS note="" ;;
        124|137) status=TIMEOUT note="stopped after ${cap} s" ;;
        *) status=FAIL note=$(grep -E '^(devcheck|bench|op_compare|FAILED|ERROR|make)' "$OUT/$name.log" | tail -3 | tr '\t\n' '  ')
           [ -n "$note" ] || note=$(tail -2 "$OUT/$name.log" | tr '\t\n' '  ') ;;
    esac
    printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$(($(date +%s) - t0))" "${note:0:400}" >> "$WORK/stages.tsv"
    echo "   $status in $(($(date +%s) - t0)) s ${note:0:200}"
    report > /dev/null   # the results so far, in case the run is stopped from outside before the next stage ends
}

report() {
    "$PY" "$ROOT/tools/device_report.py" --work "$WORK" --out "$OUT" --dry "$DRY" --seconds "$(($(date +%s) - START))"
}
budget_of() { local sb; for sb in $PLAN; do [ "${sb%%:*}" = "$1" ] && echo "${sb#*:}"; done; }

: > "$WORK/env.sh"
prep=
for sb in $PLAN; do
    name=${sb%%:*}
    if [ "$name" = build ] && [ "$DRY" = 0 ] && [ -z "$prep" ]; then
        # the bench's model (2.2 GB of safetensors) is written while the build, ops and oracle run
        ( . "$WORK/env.sh"; timeout "$(( $(budget_of build) + $(budget_of ops) + $(budget_of oracle || true) + 0 ))" \
            "$PY" bench/bench_device.py --prepare --cache "$WORK/cache" > "$OUT/prepare.log" 2>&1 ) &
        prep=$!
    fi
    [ "$name" = bench ] && [ -n "$prep" ] && wait "$prep"
    run_stage "$name" "${sb#*:}"
done
[ -f "$OUT/prepare.log" ] && { cat "$OUT/prepare.log" >> "$OUT/bench.log"; rm -f "$OUT/prepare.log"; }
report
rc=$?
rm -rf "$WORK"
exit $rc
