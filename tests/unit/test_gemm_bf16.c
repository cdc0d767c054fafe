// k_gemm under bf16 mixed precision (src/kernels/gemm_bf16.c) against its definition: every element of c equals
// alpha * sum_k bf16(op(a))[m,k] * bf16(op(b))[k,n] + beta * c, the sum taken in double here, within the fp32
// accumulation bound K * 2^-23 * sum_k |products| (+ the rounding of alpha and beta terms). bf16() rounds to
// nearest even (PyTorch's .to(torch.bfloat16)). Also: the result differs from the fp32 product (rounding happens),
// the products that k_gemm cuts over threads, strided operands, and NaN passing through.
// Runs on the path the CPU gets (oneDNN with AVX512-BF16 / AMX, else OpenBLAS sgemm on rounded values);
// OMNISHARD_BF16_GEMM=sgemm|onednn|onednn_gemm|onednn_matmul picks one (tests/test_bf16.py runs each).
#include "check.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/knobs.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static double bf16(float f) {   // written from the definition: keep 8 significant bits, ties to even
    if (f == 0.0f || isinf(f) || isnan(f)) return f;
    int e;
    double m = frexp((double)f, &e);   // f = m * 2^e, 0.5 <= |m| < 1
    double s = ldexp(m, 8);            // 8 significant bits in the integer part
    double r = nearbyint(s);           // the default rounding mode: to nearest, ties to even
    return ldexp(r, e - 8);
}

static int case_ok(const char *name, int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t pad, float alpha,
                   float beta, uint64_t seed) {
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int64_t lda = ac + pad, ldb = bc + pad, ldc = N + pad;
    float *a = os_alloc(sizeof(float) * (size_t)(ar * lda), "a"), *b = os_alloc(sizeof(float) * (size_t)(br * ldb), "b");
    float *c = os_alloc(sizeof(float) * (size_t)(M * ldc), "c"), *c0 = os_alloc(sizeof(float) * (size_t)(M * ldc), "c0");
    float *c32 = os_alloc(sizeof(float) * (size_t)(M * ldc), "c32");
    os_rng_fill_uniform(a, ar * lda, seed, 0, -1, 1);
    os_rng_fill_uniform(b, br * ldb, seed + 1, 0, -1, 1);
    os_rng_fill_uniform(c0, M * ldc, seed + 2, 0, -1, 1);
    memcpy(c, c0, sizeof(float) * (size_t)(M * ldc));
    memcpy(c32, c0, sizeof(float) * (size_t)(M * ldc));
    k_gemm_prec(1, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    k_gemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c32, ldc);
    double worst = 0, diff32 = 0;
    int pads_kept = 1;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t n = 0; n < N; n++) {
            double s = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                double x = bf16(ta ? a[k * lda + m] : a[m * lda + k]), y = bf16(tb ? b[n * ldb + k] : b[k * ldb + n]);
                s += x * y, mag += fabs(x * y);
            }
            double want = alpha * s + beta * c0[m * ldc + n];
            double bound = (double)(K + 2) * ldexp(1.0, -23) * (fabs(alpha) * mag + fabs(beta * c0[m * ldc + n])) + 1e-30;
            double err = fabs(c[m * ldc + n] - want) / bound;
            worst = err > worst ? err : worst;
            diff32 = fmax(diff32, fabs(c32[m * ldc + n] - want));
        }
        for (int64_t n = N; n < ldc; n++) pads_kept &= c[m * ldc + n] == c0[m * ldc + n];
    }
    printf("%s %s%s %lldx%lldx%lld alpha %g beta %g: error %.3g of the fp32 bound\n", name, ta ? "T" : "N",
           tb ? "T" : "N", (long long)M, (long long)N, (long long)K, alpha, beta, worst);
    CHECK(worst <= 1.0, "%s: error %.3g of the fp32 accumulation bound", name, worst);
    CHECK(pads_kept, "%s: c's padding changed", name);
    // the fp32 product is not the bf16 one: the rounding happened (inputs in (-1, 1) lose ~2^-9 each)
    CHECK(diff32 > 1e-4, "%s: the fp32 result differs from the bf16 definition by only %.3g", name, diff32);
    os_free(a), os_free(b), os_free(c), os_free(c0), os_free(c32);
    return worst <= 1.0;
}

int main(void) {
    const char *path = NULL;
    if (k_gemm_bf16_setup(os_knobs()->bf16_gemm, &path) < 0) return fprintf(stderr, "FAIL setup: %s\n", os_errmsg()), 1;
    printf("bf16 GEMM path: %s (%s)\n", path, k_gemm_bf16_impl());
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            case_ok("small", ta, tb, 5, 7, 9, 0, 1.0f, 0.0f, 10 + 2 * ta + tb);
            case_ok("strided", ta, tb, 33, 17, 65, 3, 0.375f, 1.0f, 20 + 2 * ta + tb);
            case_ok("split over threads", ta, tb, 300, 200, 96, 0, 1.0f, 1.0f, 30 + 2 * ta + tb);
            case_ok("split columns", ta, tb, 40, 700, 160, 1, -0.5f, 0.5f, 40 + 2 * ta + tb);
        }
    // a bf16 copy of an operand (k_cast, as the runtime keeps its weights: os_weights.tensor) read as a bf16 view
    // gives the same product as rounding the fp32 operand in the call, whole and as a block at the copy's row stride
    // (src/model/loss.c reads lm_head's text or audio rows so), transposed or not; and the copy holds the
    // definition's bf16 values. The copy is of ANOTHER array (w2), so a product that reads it equals the product on w2.
    {
        int64_t M = 29, N = 96, K = 80, r = 30, n = 40, c0 = 8, k = 32;
        float *w = os_alloc(sizeof(float) * (size_t)(N * K), "w"), *w2 = os_alloc(sizeof(float) * (size_t)(N * K), "w2");
        float *a = os_alloc(sizeof(float) * (size_t)(M * K), "a"), *want[3], *got[3];
        uint16_t *copy = os_alloc(sizeof(uint16_t) * (size_t)(N * K), "bf16 copy");
        for (int i = 0; i < 3; i++)
            want[i] = os_alloc(sizeof(float) * (size_t)(M * N), "want"), got[i] = os_alloc(sizeof(float) * (size_t)(M * N), "got");
        os_rng_fill_uniform(w, N * K, 60, 0, -1, 1);
        os_rng_fill_uniform(w2, N * K, 61, 0, -1, 1);
        os_rng_fill_uniform(a, M * K, 62, 0, -1, 1);
        k_cast(os_mat(copy, OS_BF16, N, K, K), os_matf(w2, N, K, K));
        int exact = 1;
        for (int64_t i = 0; i < N * K; i++) {
            uint32_t u = (uint32_t)copy[i] << 16;
            float v;
            memcpy(&v, &u, 4);
            exact &= (double)v == bf16(w2[i]);
        }
        CHECK(exact, "k_cast fp32 -> bf16: not the bf16 values");
        os_tensor bw = os_mat(copy, OS_BF16, N, K, K), fw = os_matf(w2, N, K, K), none = os_tensor_none();
        os_tensor blk[3] = {bw, os_tensor_cols(os_tensor_rows(bw, r, n), c0, k), os_tensor_rows(bw, r, n)};
        os_tensor fblk[3] = {fw, os_tensor_cols(os_tensor_rows(fw, r, n), c0, k), os_tensor_rows(fw, r, n)};
        for (int t = 0; t < 3; t++) {   // a[M, K] @ w^T; a[M, k] @ w[r:r+n, c0:c0+k]^T; a[M, n]... as rows of a: w block
            int64_t kk = t == 1 ? k : K, nn = t == 0 ? N : n;
            os_tensor av = os_matf(a, M, kk, K);
            if (t < 2) {
                k_matmul_prec(1, os_matf(want[t], M, nn, nn), av, os_tensor_t(fblk[t]), 1.0f, 0.0f, none, none);
                k_matmul_prec(1, os_matf(got[t], M, nn, nn), av, os_tensor_t(blk[t]), 1.0f, 0.0f, none, none);
            } else {   // a[M, n] @ w[r:r+n] (the block as b, not transposed: dh = dlogits @ W[c0:c1])
                os_tensor an = os_matf(a, M, n, K);
                k_matmul_prec(1, os_matf(want[t], M, K, K), an, fblk[t], 1.0f, 0.0f, none, none);
                k_matmul_prec(1, os_matf(got[t], M, K, K), an, blk[t], 1.0f, 0.0f, none, none);
                nn = K;
            }
            CHECK(!memcmp(want[t], got[t], sizeof(float) * (size_t)(M * nn)), "bf16 copy (case %d): not the product "
                  "rounding the operand in the call", t);
        }
        k_matmul_prec(1, os_matf(want[0], M, N, N), os_matf(a, M, K, K), os_tensor_t(os_matf(w, N, K, K)), 1.0f, 0.0f,
                      none, none);
        CHECK(memcmp(want[0], got[0], sizeof(float) * (size_t)(M * N)), "the bf16 copy of w2 gave w's product");
        os_free(w), os_free(w2), os_free(a), os_free(copy);
        for (int i = 0; i < 3; i++) os_free(want[i]), os_free(got[i]);
    }
    // a NaN in a stays NaN in its row of c, and only there
    float a[4] = {1, NAN, 2, 3}, b[4] = {1, 2, 3, 4}, c[4] = {0};
    k_gemm_prec(1, 0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    CHECK(isnan(c[0]) && isnan(c[1]) && c[2] == 11.0f && c[3] == 16.0f, "nan: c = %g %g %g %g", c[0], c[1], c[2], c[3]);
    return check_report("test_gemm_bf16");
}
