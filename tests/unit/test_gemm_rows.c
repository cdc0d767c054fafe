// A row's bits do not depend on the rows beside it (docs/design.md, the section of that name): a row of
// c = alpha op(a) op(b) + beta c computed in a product of M rows, at any place among them, has the bits of the same
// row computed alone (M = 1), however many rows the product has (1-300), on 1 and 2 threads. The head's rows move
// between ranks and between chunks of rows (src/train/head_balance.c, model/loss.c), and bf16 rounds what the
// products give (the logits' gradient into the stash, dh into the layers' products): a last-bit difference there
// becomes a bf16 ulp. Checked for fp32 k_gemm, the bf16 k_gemm on the path this process gets (the CPU's, or
// OMNISHARD_BF16_GEMM's; tests/test_bf16.py runs each) and k_gemm_rounded with a rounded by the caller (the head's
// stash), on products whose rows are op(a)'s rows (ta 0: a layer's forward and input gradient, the head's logits and
// dh, the adapter's; a weight gradient, ta 1, sums over rows, and on AMX runs on oneDNN's matmul, whose blocking
// follows M); shapes of the head's and a layer's products, K up to 4096, padded row strides, beta 0 and 1. And the
// cross-entropy kernel: a row's gradient is the same among other rows and alone at four alignments.
// Expected values: the row alone (an invariant).
#include "check.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/knobs.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include <omp.h>
#include <stdio.h>
#include <string.h>

enum { FP32, BF16, BF16_PRE_A };   // the product: k_gemm; k_gemm_prec(1); k_matmul_prec(1) with a's bf16 copy
static const char *const KIND[] = {"fp32", "bf16", "bf16, a rounded by the caller"};

// c[M, N] (row stride ldc) = alpha op(a)[M, K] op(b) + beta c, a stored [M, K] with row stride lda (ta 0)
static void product(int kind, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
                    const float *b, float beta, float *c, int64_t ldc) {
    int64_t ldb = tb ? K : N;
    if (kind == FP32) {
        k_gemm(0, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    } else if (kind == BF16) {
        k_gemm_prec(1, 0, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    } else {
        uint16_t *r = os_alloc(sizeof(uint16_t) * (size_t)(M * K), "rounded a");   // a's bf16 copy, read as bf16 (the stash)
        k_cast(os_mat(r, OS_BF16, M, K, K), os_matf(a, M, K, lda));
        os_tensor bv = os_matf(b, tb ? N : K, tb ? K : N, ldb), none = os_tensor_none();
        k_matmul_prec(1, os_matf(c, M, N, ldc), os_mat(r, OS_BF16, M, K, K), tb ? os_tensor_t(bv) : bv, alpha, beta,
                      none, none);
        os_free(r);
    }
}

// every row count in 2..dense, then every step-th to P; each product over rows [s, s + M) of a pool of P rows,
// starting at its first row, its last, and one between
static void rows_alone(int kind, const char *name, int tb, int64_t P, int64_t dense, int64_t step, int64_t N,
                       int64_t K, float beta, int threads) {
    int64_t lda = K + 3, ldc = N + 1;   // padded row strides, as the logits' (stride V) and the stash's
    float *a = os_alloc(sizeof(float) * (size_t)(P * lda), "a"), *b = os_alloc(sizeof(float) * (size_t)(K * N), "b");
    size_t cb = sizeof(float) * (size_t)(P * ldc);
    float *c0 = os_alloc(cb, "c0"), *alone = os_alloc(cb, "alone"), *c = os_alloc(cb, "c");
    os_rng_fill_uniform(a, P * lda, 11 + (uint64_t)K, 0, -1, 1);
    os_rng_fill_uniform(b, K * N, 12 + (uint64_t)N, 0, -1, 1);
    os_rng_fill_uniform(c0, P * ldc, 13, 0, -1, 1);
    omp_set_num_threads(threads);
    memcpy(alone, c0, cb);
    for (int64_t r = 0; r < P; r++) product(kind, tb, 1, N, K, 0.75f, a + r * lda, lda, b, beta, alone + r * ldc, ldc);
    int64_t bad = 0, first_m = 0, first_s = 0, first_r = 0;
    for (int64_t M = 2; M <= P; M += M < dense ? 1 : step) {
        int64_t starts[3] = {0, (M * 5) % (P - M + 1), P - M};
        for (int i = 0; i < 3; i++) {
            int64_t s = starts[i];
            memcpy(c + s * ldc, c0 + s * ldc, sizeof(float) * (size_t)(M * ldc));
            product(kind, tb, M, N, K, 0.75f, a + s * lda, lda, b, beta, c + s * ldc, ldc);
            for (int64_t r = s; r < s + M; r++)
                if (memcmp(c + r * ldc, alone + r * ldc, sizeof(float) * (size_t)N)) {
                    if (!bad++) first_m = M, first_s = s, first_r = r;
                    break;
                }
        }
    }
    printf("%s %s: N%s %lld x %lld, beta %g, %d thread%s: %lld products with a row unlike the row alone\n", KIND[kind],
           name, tb ? "T" : "N", (long long)N, (long long)K, beta, threads, threads > 1 ? "s" : "", (long long)bad);
    CHECK(!bad, "%s %s (N%s, N %lld, K %lld, beta %g, %d thread(s)): row %lld of the %lld-row product from row %lld "
          "differs from the row alone (and %lld more products)", KIND[kind], name, tb ? "T" : "N", (long long)N,
          (long long)K, beta, threads, (long long)first_r, (long long)first_m, (long long)first_s,
          (long long)(bad - 1));
    os_free(a), os_free(b), os_free(c0), os_free(alone), os_free(c);
}

// k_xent_fwd_bwd: row r's gradient among P rows (row stride ld) equals the row alone, placed at every alignment
static void xent_rows_alone(int64_t V, int64_t P) {
    int64_t ld = V + 1;
    size_t xb = sizeof(float) * (size_t)(P * ld);
    float *x = os_alloc(xb, "logits"), *all = os_alloc(xb, "all");
    float *one = os_alloc(sizeof(float) * (size_t)(V + 16), "one row");
    int32_t *y = os_alloc(sizeof(int32_t) * (size_t)P, "labels");
    os_rng_fill_uniform(x, P * ld, 21, 0, -8, 8);
    for (int64_t r = 0; r < P; r++) y[r] = (int32_t)((r * 37) % V);
    memcpy(all, x, xb);
    k_xent_fwd_bwd(all, ld, y, P, V, 0.5f, NULL);
    int64_t bad = 0;
    for (int64_t r = 0; r < P; r++)
        for (int off = 0; off < 16; off += 5) {   // 0, 5, 10, 15 floats from a 64-byte boundary
            memcpy(one + off, x + r * ld, sizeof(float) * (size_t)V);
            k_xent_fwd_bwd(one + off, V, y + r, 1, V, 0.5f, NULL);
            bad += memcmp(one + off, all + r * ld, sizeof(float) * (size_t)V) != 0;
        }
    printf("xent V %lld: %lld rows unlike the row alone\n", (long long)V, (long long)bad);
    CHECK(!bad, "xent V %lld: %lld of %lld rows' gradients differ from the row alone at some alignment", (long long)V,
          (long long)bad, (long long)(4 * P));
    os_free(x), os_free(all), os_free(one), os_free(y);
}

int main(void) {
    const char *path = NULL;
    if (k_gemm_bf16_setup(os_knobs()->bf16_gemm, &path) < 0) return fprintf(stderr, "FAIL setup: %s\n", os_errmsg()), 1;
    const char *impl = k_gemm_bf16_impl();
    printf("bf16 GEMM path: %s (%s)\n", path, impl);
    // oneDNN's matmul primitive forced for every product (OMNISHARD_BF16_GEMM=onednn_matmul, for comparisons) chooses
    // its blocking from M: its rows depend on the row count (docs/training.md "bf16 mixed precision")
    const char *forced = os_knobs()->bf16_gemm;
    int bf16_rows = !(forced && !strcmp(forced, "onednn_matmul"));
    if (!bf16_rows) printf("bf16: skipped (the forced matmul primitive's rows depend on the row count)\n");
    for (int kind = FP32; kind <= BF16_PRE_A; kind++) {
        if (kind != FP32 && !bf16_rows) continue;
        for (int threads = 1; threads <= 2; threads++) {
            rows_alone(kind, "logits", 1, 120, 64, 7, 192, 32, 0.0f, threads);      // the head's forward: h W^T
            rows_alone(kind, "dh", 0, 120, 64, 7, 32, 192, 0.0f, threads);          // its input gradient: dlogits W
            rows_alone(kind, "adapter", 1, 90, 64, 7, 240, 80, 0.0f, threads);      // the group-decode adapter
            rows_alone(kind, "adapter dA", 0, 90, 64, 7, 80, 240, 1.0f, threads);   // and its input gradient
            rows_alone(kind, "layer", 1, 300, 16, 13, 128, 256, 1.0f, threads);     // cut over threads from 256 rows
            rows_alone(kind, "long K", 0, 70, 40, 7, 96, 4096, 0.0f, threads);      // K = 4096 (AMX blocks K by M)
        }
    }
    xent_rows_alone(192, 40);
    xent_rows_alone(83, 40);
    return check_report("test_gemm_rows");
}
