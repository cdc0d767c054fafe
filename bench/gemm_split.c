// What cutting a product into blocks costs the single-threaded sgemm: CPU time (this thread's clock, so the load
// of other jobs on the machine changes it little) of each training-step product computed whole and cut into P
// blocks along the longer of M and N, as k_gemm_run cuts it for its threads (src/kernels/gemm.c), every block
// run on this one thread. Rounds alternate the cuts (1, 2, 4, 8 blocks); per cut the best call of the round,
// then the median over rounds. usage: gemm_split [rounds, default 5] [rows, default 512]
// Prints per shape the whole product's GFLOP/s (CPU time) and each cut's CPU time as a ratio to it, and checks that
// every cut gives the whole product's c bit for bit (k_gemm_run's promise: thread counts do not change a number).
#include "core/alloc.h"
#include "core/rng.h"
#include "gemm_cut.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    cut_setup(argc, argv);
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    int64_t R = argc > 2 ? atoll(argv[2]) : 512, hr = (1 << 25) / 156160;   // the head's logits chunk rows
    struct { const char *name; int ta, tb; int64_t M, N, K; } sh[] = {
        {"q/o fwd", 0, 1, R, 896, 896},        {"k/v fwd", 0, 1, R, 128, 896},     {"gate/up fwd", 0, 1, R, 4864, 896},
        {"down fwd", 0, 1, R, 896, 4864},      {"q/o dx", 0, 0, R, 896, 896},      {"k/v dx", 0, 0, R, 896, 128},
        {"gate/up dx", 0, 0, R, 896, 4864},    {"down dx", 0, 0, R, 4864, 896},    {"q/o dw", 1, 0, 896, 896, R},
        {"k/v dw", 1, 0, 128, 896, R},         {"gate/up dw", 1, 0, 4864, 896, R}, {"down dw", 1, 0, 896, 4864, R},
        {"head fwd", 0, 1, hr, 156160, 896},   {"head dx", 0, 0, hr, 896, 156160}, {"head dw", 1, 0, 156160, 896, hr},
        {"adapter fwd", 0, 1, hr, 12480, 4160},
    };
    enum { NS = sizeof sh / sizeof sh[0], NC = 4 };
    const int cuts[NC] = {1, 2, 4, 8};
    printf("rows %lld, %d rounds; CPU time of the cut product / the whole product\n", (long long)R, rounds);
    printf("| shape (M x N x K) | whole GFLOP/s (CPU) | 2 blocks | 4 blocks | 8 blocks |\n|---|---|---|---|---|\n");
    double mix[NC] = {0};
    int bad = 0;
    for (int s = 0; s < NS; s++) {
        int64_t M = sh[s].M, N = sh[s].N, K = sh[s].K;
        float *a = os_alloc((size_t)(M * K) * 4, "a"), *b = os_alloc((size_t)(K * N) * 4, "b"), *c = os_alloc((size_t)(M * N) * 4, "c");
        os_rng_fill_uniform(a, M * K, 1, 0, -1, 1);
        os_rng_fill_uniform(b, K * N, 2, 0, -1, 1);
        k_gemm_op g = {sh[s].ta, sh[s].tb, M, N, K, 1.0f, 0.0f, a, b, sh[s].ta ? M : K, sh[s].tb ? K : N, N, c, 4};
        double *t = calloc((size_t)(rounds * NC), sizeof *t);
        float *ref = os_alloc((size_t)(M * N) * 4, "whole c");
        cut_run(&g, 1, 0);   // warm-up, and the reference c
        memcpy(ref, c, (size_t)(M * N) * 4);
        for (int k = 1; k < NC; k++) {
            cut_run(&g, cuts[k], 0);
            if (memcmp(ref, c, (size_t)(M * N) * 4))
                printf("%s: %d blocks: c differs from the whole product's\n", sh[s].name, cuts[k]), bad++;
        }
        os_free(ref);
        for (int r = 0; r < rounds; r++)
            for (int ci = 0; ci < NC; ci++) {
                int k = (ci + r) % NC;   // rotate the order per round
                double best = 1e30;
                for (int rep = 0; rep < 3; rep++) {
                    double t0 = cpu_now();
                    cut_run(&g, cuts[k], 0);
                    double dt = cpu_now() - t0;
                    best = dt < best ? dt : best;
                }
                t[k * rounds + r] = best;
            }
        double med[NC];
        for (int k = 0; k < NC; k++) {
            qsort(t + k * rounds, (size_t)rounds, sizeof *t, cut_cmp);
            med[k] = t[k * rounds + rounds / 2];
            mix[k] += med[k];
        }
        printf("| %s %lldx%lldx%lld | %.1f | %.3f | %.3f | %.3f |\n", sh[s].name, (long long)M, (long long)N,
               (long long)K, 2.0 * (double)(M * N) * (double)K / med[0] * 1e-9, med[1] / med[0], med[2] / med[0],
               med[3] / med[0]);
        fflush(stdout);
        free(t);
        os_free(a);
        os_free(b);
        os_free(c);
    }
    printf("| all shapes, once each | | %.3f | %.3f | %.3f |\n", mix[1] / mix[0], mix[2] / mix[0], mix[3] / mix[0]);
    printf("every cut bitwise equal to the whole product: %s\n", bad ? "NO" : "yes");
    return bad != 0;
}
