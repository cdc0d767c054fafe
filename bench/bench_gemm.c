// sgemm and k_linear_fwd throughput (GFLOP/s, best of a few repetitions) under the OpenBLAS core type that
// omnishard's start-up (os_cpu_setup) leaves in place. usage: bench_gemm [seconds per shape, default 1]
// Prints one line: core=NAME then name=GFLOP/s pairs (parsed by bench/gemm_coretype.sh), the bf16 linears last
// (bf16_path=onednn|sgemm: src/kernels/gemm_bf16.c). sgemm_2048_cpu: the same product's FLOPs per CPU second of the
// process (best repetition): with one thread, a rate that load on other cores does not lower (wall time under
// nice or a crowded machine does), the reference of bench/profile_step.py's CPU-based model FLOP rate.
#include "core/alloc.h"
#include "core/cpu.h"
#include "core/rng.h"
#include "core/timer.h"
#include "kernels/kernels.h"
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

static double budget = 1.0;
static double best_cpu;   // the last gflops() call's best CPU seconds (all threads) of one product

// c[M,N] = a[M,K] @ b[K,N] with cblas directly (linear = 0) or out[M,N] = inp[M,K] @ w[N,K]^T via k_linear_fwd
static double gflops(int64_t M, int64_t N, int64_t K, int linear) {
    float *a = os_alloc((size_t)(M * K) * sizeof(float), "bench a"), *b = os_alloc((size_t)(K * N) * sizeof(float), "bench b");
    float *c = os_alloc((size_t)(M * N) * sizeof(float), "bench c");
    os_rng_fill_uniform(a, M * K, 1, 0, -1, 1);
    os_rng_fill_uniform(b, K * N, 2, 0, -1, 1);
    double best = 1e30, total = 0;
    best_cpu = 1e30;
    for (int rep = 0; rep < 20 && (rep < 3 || total < budget); rep++) {   // rep 0 warms up
        double t0 = os_now(), c0 = os_cpu_now();
        if (linear)
            k_linear_fwd(c, a, b, NULL, M, K, N);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, a, (int)K, b, (int)N,
                        0.0f, c, (int)N);
        double dt = os_now() - t0, dc = os_cpu_now() - c0;
        if (rep > 0) best = dt < best ? dt : best, total += dt, best_cpu = dc < best_cpu ? dc : best_cpu;
    }
    os_free(a);
    os_free(b);
    os_free(c);
    return 2.0 * (double)M * (double)N * (double)K / best * 1e-9;
}

int main(int argc, char **argv) {
    os_cpu_setup(argc, argv);   // may re-execute this program with OPENBLAS_CORETYPE=SkylakeX
    if (argc > 1) budget = atof(argv[1]);
    printf("core=%s", os_blas_coretype());
    fflush(stdout);
    printf(" sgemm_2048=%.1f", gflops(2048, 2048, 2048, 0));
    printf(" sgemm_2048_cpu=%.1f", 2.0 * 2048 * 2048 * 2048 / best_cpu * 1e-9);
    printf(" sgemm_512x4864x896=%.1f", gflops(512, 4864, 896, 0));   // M x N x K: MLP up-projection
    printf(" linear_512x896x4864=%.1f", gflops(512, 4864, 896, 1));  // N x I x O: gate/up projection
    printf(" linear_512x4864x896=%.1f", gflops(512, 896, 4864, 1)); // down projection
    // the same two linears under --torch_dtype bfloat16 (rounding of both inputs included)
    const char *path = "?";
    if (k_gemm_bf16_setup(&path) == 0) {
        k_gemm_set_bf16(1);
        printf(" bf16_path=%s", path);
        printf(" bf16_linear_512x896x4864=%.1f", gflops(512, 4864, 896, 1));
        printf(" bf16_linear_512x4864x896=%.1f", gflops(512, 896, 4864, 1));
        k_gemm_set_bf16(0);
    }
    printf("\n");
    return 0;
}
