#!/bin/bash
# sgemm / k_linear_fwd GFLOP/s under three OpenBLAS core-type set-ups:
#   (a) OPENBLAS_CORETYPE unset, omnishard's own fix (os_cpu_setup re-executes with SkylakeX on AVX-512 CPUs)
#   (b) OPENBLAS_CORETYPE unset, OMNISHARD_NO_BLAS_FIX=1: OpenBLAS's own detection
#   (c) the environment as it is
# (a) and (b) also unset OPENBLAS_L2_SIZE. The three alternate for ROUNDS rounds (default 3) and each figure
# is the best over the rounds (the machine is shared: the best is the least disturbed).
# usage: [ROUNDS=3] [BUILD=build-bench] bench/gemm_coretype.sh [seconds per shape and run, default 1]
# Builds $BUILD/bench_gemm straight from the core and kernel sources.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build-bench}
mkdir -p "$B"
mpicc -std=c11 -D_GNU_SOURCE -O3 -march=native -fopenmp -Wall -Wextra -Isrc bench/bench_gemm.c src/core/*.c \
    src/kernels/*.c -o "$B/bench_gemm" -lopenblas -ldnnl -lm
secs=${1:-1}
echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores, OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"
echo "environment: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
runs=""
for r in $(seq "${ROUNDS:-3}"); do
    runs+="a $(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OMNISHARD_NO_BLAS_FIX "$B/bench_gemm" "$secs")"$'\n'
    runs+="b $(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMNISHARD_NO_BLAS_FIX=1 "$B/bench_gemm" "$secs")"$'\n'
    runs+="c $(env -u OMNISHARD_NO_BLAS_FIX "$B/bench_gemm" "$secs")"$'\n'
done
printf '%s' "$runs" | awk '
    { for (i = 2; i <= NF; i++) { split($i, kv, "=");
          if (kv[1] == "core") core[$1] = kv[2];
          else if (kv[1] == "bf16_path") continue;
          else { if (!(kv[1] in seen)) { seen[kv[1]] = 1; keys[++nk] = kv[1] }
                 if (kv[2] > best[$1, kv[1]]) best[$1, kv[1]] = kv[2] } } }
    END {
        printf "%-22s %12s %12s %12s %8s\n", "GFLOP/s", "(a) " core["a"], "(b) " core["b"], "(c) " core["c"], "(a)/(b)"
        for (j = 1; j <= nk; j++) { k = keys[j]
            printf "%-22s %12.1f %12.1f %12.1f %8.2f\n", k, best["a", k], best["b", k], best["c", k], best["a", k] / best["b", k] }
    }'
