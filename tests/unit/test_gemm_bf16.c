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
    // a pinned operand (k_gemm_bf16_pin) gives the same product as rounding it in the call, and a product that
    // reads another operand of the same shape is not given the pinned one
    {
        int64_t M = 37, N = 300, K = 64;
        float *a = os_alloc(sizeof(float) * (size_t)(M * K), "a"), *w = os_alloc(sizeof(float) * (size_t)(N * K), "w");
        float *w2 = os_alloc(sizeof(float) * (size_t)(N * K), "w2"), *c[4];
        for (int i = 0; i < 4; i++) c[i] = os_alloc(sizeof(float) * (size_t)(M * N), "c");
        os_rng_fill_uniform(a, M * K, 50, 0, -1, 1);
        os_rng_fill_uniform(w, N * K, 51, 0, -1, 1);
        os_rng_fill_uniform(w2, N * K, 52, 0, -1, 1);
        k_gemm_prec(1, 0, 1, M, N, K, 1.0f, a, K, w, K, 0.0f, c[0], N);    // w rounded in the call
        k_gemm_bf16_pin(w, N, K, K);
        k_gemm_prec(1, 0, 1, M, N, K, 1.0f, a, K, w, K, 0.0f, c[1], N);    // the pinned copy
        k_gemm_prec(1, 0, 1, M, N, K, 1.0f, a, K, w2, K, 0.0f, c[2], N);   // another operand
        k_gemm_bf16_unpin();
        k_gemm_prec(1, 0, 1, M, N, K, 1.0f, a, K, w2, K, 0.0f, c[3], N);
        size_t bytes = sizeof(float) * (size_t)(M * N);
        CHECK(!memcmp(c[0], c[1], bytes), "pinned operand: the product differs from rounding it in the call");
        CHECK(!memcmp(c[2], c[3], bytes), "a product reading another operand was given the pinned one");
        os_free(a), os_free(w), os_free(w2);
        for (int i = 0; i < 4; i++) os_free(c[i]);
    }
    // a block of the pinned operand (rows [r, r + n), columns [c, c + k) at the pinned row stride; src/model/loss.c
    // reads lm_head's text or audio rows so) reads the pinned copy at its offset. w is overwritten after the pin, so
    // a product served from the copy gives the product on w's old values, one rounded in the call that on the new
    // ones (w2): as for a block past the pinned rows (the pin covers N - 1 of w's N rows) or crossing a row's end
    {
        int64_t M = 21, N = 90, K = 48, r = 30, n = 40, c = 8, k = 32, P = N - 1;
        float *a = os_alloc(sizeof(float) * (size_t)(M * K), "a"), *w = os_alloc(sizeof(float) * (size_t)(N * K), "w");
        float *w2 = os_alloc(sizeof(float) * (size_t)(N * K), "w2"), *want[3], *got[3];
        for (int i = 0; i < 3; i++)
            want[i] = os_alloc(sizeof(float) * (size_t)(M * n), "want"), got[i] = os_alloc(sizeof(float) * (size_t)(M * n), "got");
        os_rng_fill_uniform(a, M * K, 53, 0, -1, 1);
        os_rng_fill_uniform(w, N * K, 54, 0, -1, 1);
        os_rng_fill_uniform(w2, N * K, 55, 0, -1, 1);
        const int64_t rows[3] = {n, 1, 1}, cols[3] = {k, K, k}, at[3] = {r * K + c, P * K, r * K + K - k / 2};
        for (int t = 0; t < 3; t++)   // 0: the pinned block (old values); 1: the unpinned last row, 2: across a row's end (new)
            k_gemm_prec(1, 0, 1, M, rows[t], cols[t], 1.0f, a, K, (t ? w2 : w) + at[t], K, 0.0f, want[t], rows[t]);
        k_gemm_bf16_pin(w, P, K, K);
        memcpy(w, w2, sizeof(float) * (size_t)(N * K));
        for (int t = 0; t < 3; t++) k_gemm_prec(1, 0, 1, M, rows[t], cols[t], 1.0f, a, K, w + at[t], K, 0.0f, got[t], rows[t]);
        k_gemm_bf16_unpin();
        const char *what[3] = {"a block inside the pin did not read the pinned copy",
                               "a row past the pinned rows was not rounded in the call",
                               "a block crossing a pinned row's end was not rounded in the call"};
        for (int t = 0; t < 3; t++) CHECK(!memcmp(want[t], got[t], sizeof(float) * (size_t)(M * rows[t])), "%s", what[t]);
        os_free(a), os_free(w), os_free(w2);
        for (int i = 0; i < 3; i++) os_free(want[i]), os_free(got[i]);
    }
    // bound operands (k_gemm_bf16_bind): an operand inside the bound range reads the bound copy at its offset and row
    // stride. The copy is of ANOTHER array (w2), so a product that reads it equals the same product on w2; one
    // reaching past the range is rounded in the call (equals the product on w). And the copy's format:
    // k_bf16_round + k_gemm_bf16_widen give the definition's bf16 values.
    {
        int64_t M = 29, N = 96, K = 80, off = 37, n = off + N * K;   // w = buf[off ..] as [N, K]
        int64_t esz = k_gemm_bf16_esz();
        float *buf = os_alloc(sizeof(float) * (size_t)(n + K), "buf"), *buf2 = os_alloc(sizeof(float) * (size_t)(n + K), "buf2");
        float *a = os_alloc(sizeof(float) * (size_t)(M * K), "a"), *c[7];
        void *copy = os_alloc((size_t)(esz * n), "bound copy");
        for (int i = 0; i < 7; i++) c[i] = os_alloc(sizeof(float) * (size_t)(M * N), "c");
        os_rng_fill_uniform(buf, n + K, 60, 0, -1, 1);
        os_rng_fill_uniform(buf2, n + K, 61, 0, -1, 1);
        os_rng_fill_uniform(a, M * K, 62, 0, -1, 1);
        k_bf16_round(copy, buf2, n);
        k_gemm_bf16_widen(copy, n);
        int exact = 1;
        for (int64_t i = 0; i < n; i++) {
            float v;
            if (esz == 2) {
                uint32_t u = (uint32_t)((uint16_t *)copy)[i] << 16;
                memcpy(&v, &u, 4);
            } else
                v = ((float *)copy)[i];
            exact &= (double)v == bf16(buf2[i]);
        }
        CHECK(exact, "k_bf16_round + k_gemm_bf16_widen: not the bf16 values");
        const float *w = buf + off, *w2 = buf2 + off, *late = buf + off + K;   // late: [N, K] from row 1: one row past
        k_gemm_prec(1, 0, 1, M, N, K, 1.0f, a, K, w2, K, 0.0f, c[0], N);             // on w2, rounded in the call
        k_gemm_prec(1, 0, 0, M, N / 2, K / 2, 1.0f, a, K, w2 + 3, N, 0.0f, c[1], N / 2);   // a strided block of w2 as [K/2, N/2]
        k_gemm_prec(1, 0, 1, M, N, K, 1.0f, a, K, late, K, 0.0f, c[2], N);           // on buf, rounded in the call
        k_gemm_bf16_bind(buf, n, copy);
        k_gemm_prec(1, 0, 1, M, N, K, 1.0f, a, K, w, K, 0.0f, c[3], N);
        k_gemm_prec(1, 0, 0, M, N / 2, K / 2, 1.0f, a, K, w + 3, N, 0.0f, c[4], N / 2);
        k_gemm_prec(1, 0, 1, M, N, K, 1.0f, a, K, late, K, 0.0f, c[5], N);
        k_gemm_bf16_unbind(buf);
        k_gemm_prec(1, 0, 1, M, N, K, 1.0f, a, K, w, K, 0.0f, c[6], N);              // unbound again: w itself
        size_t bytes = sizeof(float) * (size_t)(M * N);
        CHECK(!memcmp(c[0], c[3], bytes), "bound operand: not the bound copy's product");
        CHECK(!memcmp(c[1], c[4], bytes / 2), "bound operand (strided block): not the bound copy's product");
        CHECK(!memcmp(c[2], c[5], bytes), "an operand reaching past the bound range was given the bound copy");
        CHECK(memcmp(c[0], c[6], bytes), "unbound: the product still reads the bound copy");
        os_free(buf), os_free(buf2), os_free(a), os_free(copy);
        for (int i = 0; i < 7; i++) os_free(c[i]);
    }
    // a NaN in a stays NaN in its row of c, and only there
    float a[4] = {1, NAN, 2, 3}, b[4] = {1, 2, 3, 4}, c[4] = {0};
    k_gemm_prec(1, 0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    CHECK(isnan(c[0]) && isnan(c[1]) && c[2] == 11.0f && c[3] == 16.0f, "nan: c = %g %g %g %g", c[0], c[1], c[2], c[3]);
    return check_report("test_gemm_bf16");
}
