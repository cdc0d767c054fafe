// Shared by bench/gemm_split.c and bench/gemm_threads.c: the cuts of a product that they compare, and their set-up.
#pragma once
#include "core/cpu.h"
#include "kernels/gemm.h"
#include <cblas.h>

// start of the process: omnishard's OpenBLAS core type, and OpenBLAS single-threaded as k_gemm runs it
static inline void cut_setup(int argc, char **argv) {
    os_cpu_setup(argc, argv);
    openblas_set_num_threads(1);
}

// block starts lo[0..n] (lo[n] = the longer side D) of g cut as k_gemm_run cuts it: nb > 0 even blocks (multiples
// of 16), or nb < 0 the tapering cut 3/8, 3/8, 1/8, 1/8 of D; returns n (at most 8)
static inline int cut_blocks(const k_gemm_op *g, int nb, int64_t lo[9]) {
    int64_t D = g->M > g->N ? g->M : g->N;
    int n = 0;
    if (nb > 0) {
        int64_t blk = ((D + nb - 1) / nb + 15) / 16 * 16;
        for (int64_t x = 0; x < D && n < 8; x += blk) lo[n++] = x;
    } else {
        static const int eighths[] = {0, 3, 6, 7};
        for (int i = 0; i < 4; i++) {
            int64_t x = (D * eighths[i] / 8 + 8) / 16 * 16;
            if (n == 0 || (x > lo[n - 1] && x < D)) lo[n++] = x;
        }
    }
    lo[n] = D;
    return n;
}

// g cut into nb blocks (cut_blocks), the blocks run one after the other on this thread (team 0) or taken dynamically
// by the OpenMP team (team 1)
static inline void cut_run(const k_gemm_op *g, int nb, int team) {
    int64_t lo[9];
    int n = cut_blocks(g, nb, lo);
#pragma omp parallel for schedule(dynamic, 1) if (team)
    for (int i = 0; i < n; i++) {
        k_gemm_op s = k_gemm_part(g, lo[i], lo[i + 1] - lo[i]);
        k_gemm_sgemm(&s);
    }
}

static inline int cut_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
