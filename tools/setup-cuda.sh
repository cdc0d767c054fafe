#!/usr/bin/env bash
# Installs the CUDA 13.0 toolkit pieces `make CUDA=1` compiles with, from PyPI, into .cuda/ of the checkout (no GPU
# and no system CUDA needed; ../shared/docs/cuda-build.md and docs/design.md "The CUDA backend"): nvcc, NVVM, the
# runtime headers and static libcudart, and the cuBLAS (cublasLt.h) and NCCL (nccl.h) headers only. cuBLASLt and
# NCCL are opened at run time (dlopen) from the machine's CUDA, so their 420 MB and 207 MB wheels are unpacked for
# the headers and not kept. cuobjdump and nvdisasm (the SASS of the attention kernels is checked for tensor-core
# instructions: tests/test_attention_sass.py) come from their own small wheels. Safe to run again: a complete .cuda/
# is left as it is, and one from before the disassembler was added gets only it.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.cuda
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
# cuobjdump and nvdisasm into $1/nvidia/cu13/bin: 13.2 is the oldest release on PyPI (no 13.0 wheels); they read the
# 13.0 compiler's sm_80/sm_90 code
disassembler() {
    local d
    d=$(mktemp -d)
    "$PY" -m pip download -q --disable-pip-version-check --no-deps -d "$d" "nvidia-cuda-cuobjdump==13.2.*" "nvidia-cuda-nvdisasm==13.2.*"
    "$PY" - "$d" "$1" <<'PYEOF'
import glob, os, sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
for w in glob.glob(whl + "/*.whl"):   # the programs only
    with zipfile.ZipFile(w) as z:
        for n in z.namelist():
            if "/bin/" in n:
                os.chmod(z.extract(n, dest), 0o755)
PYEOF
    rm -rf "$d"
}
if [ -x "$DEST/nvidia/cu13/bin/nvcc" ] && [ -f "$DEST/nvidia/cu13/include/cublasLt.h" ] && [ -f "$DEST/nvidia/nccl/include/nccl.h" ] && [ -d "$DEST/nvidia/cu13/include/cccl" ]; then
    if [ ! -x "$DEST/nvidia/cu13/bin/cuobjdump" ] || [ ! -x "$DEST/nvidia/cu13/bin/nvdisasm" ]; then
        disassembler "$DEST"
        "$DEST/nvidia/cu13/bin/cuobjdump" --version | tail -1
    fi
    exit 0
fi
rm -rf "$DEST" "$DEST.tmp"
# nvidia-cuda-cccl: <nv/target>, which cuda_fp16.h includes (cublasLt.h includes that); nvidia-nvvm pinned too:
# the newest one's PTX is refused by the 13.0 ptxas (cuda-build.md)
"$PY" -m pip install -q --disable-pip-version-check --target "$DEST.tmp" "nvidia-cuda-nvcc==13.0.*" "nvidia-nvvm==13.0.*" \
    "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-crt==13.0.*" "nvidia-cuda-cccl==13.0.*"
WHL=$(mktemp -d)
trap 'rm -rf "$WHL"' EXIT
"$PY" -m pip download -q --disable-pip-version-check --no-deps -d "$WHL" "nvidia-cublas==13.0.*" "nvidia-nccl-cu13==2.*"
"$PY" - "$WHL" "$DEST.tmp" <<'PYEOF'
import glob, sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
for w in glob.glob(whl + "/*.whl"):   # the headers only
    with zipfile.ZipFile(w) as z:
        z.extractall(dest, [n for n in z.namelist() if "/include/" in n])
PYEOF
disassembler "$DEST.tmp"
mv "$DEST.tmp" "$DEST"
"$DEST/nvidia/cu13/bin/nvcc" --version | tail -1
