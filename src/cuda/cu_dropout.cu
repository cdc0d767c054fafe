// Inverted dropout on out/inp [N] (CPU: kernels/dropout.c): element i is kept when os_rng_uniform(key, i) >= p
// (cu_index.h cu_rng_uniform, the same bits), kept values scaled by 1 / (1 - p) computed as the CPU does; acc 0
// writes every element (0 where dropped), acc 1 adds where kept. Equal to the CPU bit for bit.
#include "cu_kern.cuh"
#include "cu_index.h"
#include "cu_ops.h"

__global__ void dropout_kernel(float *out, const float *inp, int64_t n, float p, float sc, uint64_t key, int acc) {
    CU_FOR(i, n) {
        bool keep = cu_rng_uniform(key, (uint64_t)i) >= p;
        if (acc) {
            if (keep) out[i] = __fadd_rn(out[i], __fmul_rn(inp[i], sc));
        } else {
            out[i] = keep ? __fmul_rn(inp[i], sc) : 0.0f;
        }
    }
}

void cu_dropout(float *out, const float *inp, int64_t N, float p, uint64_t key, int acc) {
    if (N <= 0) return;
    float sc = 1.0f / (1.0f - p);
    dropout_kernel<<<cu_grid(N), CU_THREADS, 0, cu_stream()>>>(out, inp, N, p, sc, key, acc);
    CU_LAUNCHED("dropout_kernel");
}
