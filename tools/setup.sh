#!/usr/bin/env bash
# Installs everything omnishard builds and tests with (Debian 12), creates the Python venv for the oracle,
# and builds build/omnishard. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq build-essential pkg-config python3-venv libopenblas-dev libdnnl-dev libopenmpi-dev openmpi-bin libcjson-dev libpcre2-dev libsndfile1-dev zlib1g-dev espeak-ng sox iproute2 util-linux libcairo2 >/dev/null
[ -x .venv/bin/python ] || python3 -m venv .venv
# tests/requirements.txt also holds what `omnishard convert` runs on: pyarrow, soundfile, tqdm, numpy
.venv/bin/pip install -q -r tests/requirements.txt
.venv/bin/pip install -q --no-deps -r tests/requirements-nodeps.txt
make -j"$(nproc)"
