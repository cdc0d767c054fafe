#!/usr/bin/env bash
# Installs the CUDA 13.0 toolkit pieces `make CUDA=1` compiles with, from PyPI, into .cuda/ of the checkout (no GPU
# and no system CUDA needed; ../shared/docs/cuda-build.md and docs/design.md "The CUDA backend"): nvcc, NVVM, the
# runtime headers and static libcudart, and the cuBLAS (cublasLt.h) and NCCL (nccl.h) headers only. cuBLASLt and
# NCCL are opened at run time (dlopen) from the machine's CUDA, so their 420 MB and 207 MB wheels are unpacked for
# the headers and not kept. Safe to run again: a complete .cuda/ is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.cuda
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
if [ -x "$DEST/nvidia/cu13/bin/nvcc" ] && [ -f "$DEST/nvidia/cu13/include/cublasLt.h" ] && [ -f "$DEST/nvidia/nccl/include/nccl.h" ] && [ -d "$DEST/nvidia/cu13/include/cccl" ]; then
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
mv "$DEST.tmp" "$DEST"
"$DEST/nvidia/cu13/bin/nvcc" --version | tail -1
