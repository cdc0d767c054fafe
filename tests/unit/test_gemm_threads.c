// k_gemm gives the same bits on 1, 2 and 3 OpenMP threads (k_gemm_run cuts a product into blocks, one
// single-threaded product each, and promises that the cut changes no number): products cut along their rows and
// along their columns, every transpose, a product whose narrowest block would be small enough for OpenBLAS's
// small-matrix kernel (M*N*K <= 10^6 sums in another order: k_gemm_run must leave it whole), and one below the
// split threshold. Expected values: the 1-thread product (an invariant, not a stored result).
#include "check.h"
#include "core/alloc.h"
#include "core/cpu.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include <omp.h>
#include <string.h>

static void same_bits(const char *name, int ta, int tb, int64_t M, int64_t N, int64_t K, uint64_t key) {
    float *a = os_alloc((size_t)(M * K) * sizeof(float), "a"), *b = os_alloc((size_t)(K * N) * sizeof(float), "b");
    float *c[3];
    os_rng_fill_uniform(a, M * K, key, 0, -1, 1);
    os_rng_fill_uniform(b, K * N, key + 1, 0, -1, 1);
    for (int t = 0; t < 3; t++) {
        c[t] = os_alloc((size_t)(M * N) * sizeof(float), "c");
        os_rng_fill_uniform(c[t], M * N, key + 2, 0, -1, 1);   // beta = 1: the same c to add to
        omp_set_num_threads(t + 1);
        k_gemm(ta, tb, M, N, K, 0.75f, a, ta ? M : K, b, tb ? K : N, 1.0f, c[t], N);
    }
    for (int t = 1; t < 3; t++)
        CHECK(!memcmp(c[0], c[t], (size_t)(M * N) * sizeof(float)), "%s ta=%d tb=%d %lldx%lldx%lld: %d threads differ "
              "from 1 thread", name, ta, tb, (long long)M, (long long)N, (long long)K, t + 1);
    for (int t = 0; t < 3; t++) os_free(c[t]);
    os_free(a);
    os_free(b);
}

int main(int argc, char **argv) {
    os_cpu_setup(argc, argv);   // the OpenBLAS core type omnishard runs with
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            same_bits("columns cut", ta, tb, 96, 900, 200, 10 + 2 * ta + tb);
            same_bits("rows cut", ta, tb, 700, 64, 150, 20 + 2 * ta + tb);
            same_bits("narrow last block", ta, tb, 260, 64, 128, 30 + 2 * ta + tb);
            same_bits("below the split threshold", ta, tb, 40, 50, 60, 40 + 2 * ta + tb);
        }
    return check_report("test_gemm_threads");
}
