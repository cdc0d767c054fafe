// Threads vs ranks on the products of a training step, in one process: the product mix of one decoder layer and
// a logits chunk (seq ROWS, issue 12's model shapes) computed on 2 OpenMP threads in two ways, alternated round by
// round so that both see the same machine load:
//   ranks:  each thread computes the whole mix on its own copies of the operands, one after the other, single-
//           threaded products (as 2 ranks x 1 thread do: no synchronisation until the end of the mix);
//   split:  one copy, every product cut over both threads by k_gemm_run (src/kernels/gemm.c), as 1 rank x 2
//           threads does; the threads meet at the end of every product.
//   cut=N:  the same with the cut of this file (below) into N even blocks taken dynamically (N = 2, 4, 8), and
//   tail:   4 blocks of 3/8, 3/8, 1/8, 1/8 of the longer side (a thread that starts late finds small blocks left).
// Prints the median wall time of each side per mix (the ranks side does two mixes in that time, so its time is
// halved) and its ratio to ranks. usage: gemm_threads [rounds, default 7] [rows, default 512]
#include "core/alloc.h"
#include "core/rng.h"
#include "core/timer.h"
#include "gemm_cut.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct { const char *name; int ta, tb; int64_t M, N, K; } shape;

int main(int argc, char **argv) {
    cut_setup(argc, argv);
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    int64_t R = argc > 2 ? atoll(argv[2]) : 512, hr = (1 << 25) / 156160;
    omp_set_num_threads(2);
    // one decoder layer's linears (forward, dx, dw) and attention-free; a logits chunk on a quarter of the
    // vocabulary (the whole head is 4 such quarters: kept short so that a round stays short)
    static const shape sh[] = {
        {"q/o fwd", 0, 1, 0, 896, 896},    {"k/v fwd", 0, 1, 0, 128, 896},     {"gate/up fwd", 0, 1, 0, 4864, 896},
        {"down fwd", 0, 1, 0, 896, 4864},  {"q/o dx", 0, 0, 0, 896, 896},      {"k/v dx", 0, 0, 0, 896, 128},
        {"gate/up dx", 0, 0, 0, 896, 4864}, {"down dx", 0, 0, 0, 4864, 896},   {"q/o dw", 1, 0, 896, 896, 0},
        {"k/v dw", 1, 0, 128, 896, 0},     {"gate/up dw", 1, 0, 4864, 896, 0}, {"down dw", 1, 0, 896, 4864, 0},
        {"head fwd", 0, 1, -1, 39040, 896}, {"head dx", 0, 0, -1, 896, 39040}, {"head dw", 1, 0, 39040, 896, -1},
    };
    // per product: how often it occurs in a layer (q,o / k,v / gate,up count twice)
    static const int times[] = {2, 2, 2, 1, 2, 2, 2, 1, 2, 2, 2, 1, 1, 1, 1};
    enum { NS = sizeof sh / sizeof sh[0], NSIDE = 6 };
    const char *side[NSIDE] = {"ranks", "split (k_gemm_run)", "cut=2", "cut=4", "cut=8", "tail 3/8,3/8,1/8,1/8"};
    const int nbs[NSIDE] = {0, 0, 2, 4, 8, -1};
    k_gemm_op g[2][NS];
    double flops = 0;
    for (int c = 0; c < 2; c++)
        for (int s = 0; s < NS; s++) {
            int64_t M = sh[s].M == 0 ? R : sh[s].M < 0 ? hr : sh[s].M, N = sh[s].N, K = sh[s].K == 0 ? R : sh[s].K < 0 ? hr : sh[s].K;
            float *a = os_alloc((size_t)(M * K) * 4, "a"), *b = os_alloc((size_t)(K * N) * 4, "b"), *cc = os_alloc((size_t)(M * N) * 4, "c");
            os_rng_fill_uniform(a, M * K, 1 + (uint64_t)c, 0, -1, 1);
            os_rng_fill_uniform(b, K * N, 3 + (uint64_t)c, 0, -1, 1);
            g[c][s] = (k_gemm_op){sh[s].ta, sh[s].tb, M, N, K, 1.0f, 0.0f, a, b, sh[s].ta ? M : K, sh[s].tb ? K : N, N, cc, 4};
            if (c == 0) flops += 2.0 * (double)(M * N) * (double)K * times[s];
        }
    double *t = calloc((size_t)(rounds * NSIDE), sizeof *t), cpu[NSIDE] = {0};
    for (int r = -1; r < rounds; r++)   // round -1 warms up
        for (int i = 0; i < NSIDE; i++) {
            int k = (i + (r < 0 ? 0 : r)) % NSIDE;
            double t0 = os_now(), c0 = cpu_now();
            if (k == 0) {
#pragma omp parallel
                {
                    int c = omp_get_thread_num() & 1;
                    for (int s = 0; s < NS; s++)
                        for (int x = 0; x < times[s]; x++) k_gemm_sgemm(&g[c][s]);
                }
            } else {
                for (int s = 0; s < NS; s++)
                    for (int x = 0; x < times[s]; x++) {
                        if (k == 1)
                            k_gemm_run(&g[0][s], k_gemm_sgemm);
                        else
                            cut_run(&g[0][s], nbs[k], 1);
                    }
            }
            double dt = os_now() - t0;
            if (r >= 0) t[k * rounds + r] = k == 0 ? dt / 2 : dt, cpu[k] += (cpu_now() - c0) / (k == 0 ? 2 : 1);
        }
    printf("2 threads, rows %lld, %d rounds, %.1f GFLOP per mix; median wall s per mix (ranks: half the time of two)\n",
           (long long)R, rounds, flops * 1e-9);
    printf("| side | s per mix | GFLOP/s | vs ranks | CPU s per mix | per-round ratios to ranks |\n|---|---|---|---|---|---|\n");
    double base = 0;
    for (int k = 0; k < NSIDE; k++) {
        double sorted[64];
        int n = rounds < 64 ? rounds : 64;
        for (int r = 0; r < n; r++) sorted[r] = t[k * rounds + r];
        qsort(sorted, (size_t)n, sizeof *sorted, cut_cmp);
        double med = sorted[n / 2];
        if (k == 0) base = med;
        printf("| %s | %.3f | %.1f | %.3f | %.3f |", side[k], med, flops / med * 1e-9, med / base, cpu[k] / rounds);
        for (int r = 0; r < n; r++) printf(" %.2f", t[k * rounds + r] / t[r]);
        printf(" |\n");
    }
    free(t);
    return 0;
}
