// k_matmul (the seam's matmul on typed views, src/kernels/matmul.c) against the products it replaces, bit for bit:
// in fp32 and in bf16 mode, every transpose given as a view (os_tensor_t), padded row strides, alpha and beta;
// a linear layer's forward with its bias and backward with its bias gradient against k_gemm and the column sums;
// bf16 operands against the fp32 ones they round from (bf16 mode: rounding in the call gives the same bits; fp32
// mode: the exact product of the widened values); a bf16 output against the fp32 result rounded (k_bf16_round); the
// bias gradient alone (no product) and row sums of a row-major a (in double, from the definition); beta 0 against
// zeroing c and accumulating; sizes of 0.
// Expected values: the existing kernels and the definitions (invariants, never matmul's own output).
#include "check.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/knobs.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static int g_bf16;   // the products' precision (k_gemm_prec, k_matmul_prec)

static float *rnd(int64_t n, uint64_t key) {
    float *x = os_alloc(sizeof(float) * (size_t)(n > 0 ? n : 1), "x");
    os_rng_fill_uniform(x, n, key, 0, -1, 1);
    return x;
}
static uint16_t *to16(const float *x, int64_t n) {
    uint16_t *h = os_alloc(2 * (size_t)(n > 0 ? n : 1), "bf16");
    k_bf16_round(h, x, n);
    return h;
}
static float *widened(const uint16_t *h, int64_t n) {   // the bf16 values as floats: the bits shifted up
    float *x = os_alloc(sizeof(float) * (size_t)(n > 0 ? n : 1), "widened");
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&x[i], &u, 4);
    }
    return x;
}
static int same(const void *x, const void *y, int64_t bytes) { return !memcmp(x, y, (size_t)bytes); }

// c = alpha op(a) op(b) + beta c with a, b stored padded (op through os_tensor_t): matmul == k_gemm; with bf16
// operands (abf, bbf) == k_gemm on the values they hold (bf16 mode: on the fp32 ones, which it rounds the same way)
static void product_case(int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t pad, float alpha, float beta,
                         int abf, int bbf, uint64_t key) {
    int bf16 = g_bf16;
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int64_t lda = ac + pad, ldb = bc + pad, ldc = N + pad;
    float *a = rnd(ar * lda, key), *b = rnd(br * ldb, key + 1), *c0 = rnd(M * ldc, key + 2);
    float *got = os_alloc(sizeof(float) * (size_t)(M * ldc), "got"), *want = os_alloc(sizeof(float) * (size_t)(M * ldc), "want");
    uint16_t *a16 = to16(a, ar * lda), *b16 = to16(b, br * ldb);
    float *aw = widened(a16, ar * lda), *bw = widened(b16, br * ldb);
    memcpy(got, c0, sizeof(float) * (size_t)(M * ldc));
    memcpy(want, c0, sizeof(float) * (size_t)(M * ldc));
    os_tensor va = abf ? os_mat(a16, OS_BF16, ar, ac, lda) : os_matf(a, ar, ac, lda);
    os_tensor vb = bbf ? os_mat(b16, OS_BF16, br, bc, ldb) : os_matf(b, br, bc, ldb);
    if (ta) va = os_tensor_t(va);
    if (tb) vb = os_tensor_t(vb);
    k_matmul_prec(g_bf16, os_matf(got, M, N, ldc), va, vb, alpha, beta, os_tensor_none(), os_tensor_none());
    const float *ra = abf && !bf16 ? aw : a, *rb = bbf && !bf16 ? bw : b;
    k_gemm_prec(g_bf16, ta, tb, M, N, K, alpha, ra, lda, rb, ldb, beta, want, ldc);
    CHECK(same(got, want, (int64_t)sizeof(float) * M * ldc), "%s %c%c %lldx%lldx%lld a %s b %s: matmul differs from "
          "k_gemm", bf16 ? "bf16" : "fp32", ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)M, (long long)N, (long long)K,
          abf ? "bf16" : "fp32", bbf ? "bf16" : "fp32");
    // the same product into a bf16 c: the fp32 result (beta on c's bf16 values) rounded once
    uint16_t *c16 = to16(c0, M * ldc), *want16 = os_alloc(2 * (size_t)(M * ldc), "want16");
    float *cw = widened(c16, M * ldc);
    memcpy(want16, c16, 2 * (size_t)(M * ldc));
    k_gemm_prec(g_bf16, ta, tb, M, N, K, alpha, ra, lda, rb, ldb, beta, cw, ldc);
    for (int64_t m = 0; m < M; m++) k_bf16_round(want16 + m * ldc, cw + m * ldc, N);
    k_matmul_prec(g_bf16, os_mat(c16, OS_BF16, M, N, ldc), va, vb, alpha, beta, os_tensor_none(), os_tensor_none());
    CHECK(same(c16, want16, 2 * M * ldc), "%s %c%c %lldx%lldx%lld: a bf16 c is not the fp32 result rounded (or its "
          "padding changed)", bf16 ? "bf16" : "fp32", ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)M, (long long)N,
          (long long)K);
    os_free(a), os_free(b), os_free(c0), os_free(got), os_free(want), os_free(a16), os_free(b16), os_free(aw);
    os_free(bw), os_free(c16), os_free(want16), os_free(cw);
}

// db[O] += the column sums of d[N, O], each in double with n in order, rounded once (the definition)
static void col_sums(float *db, const float *d, int64_t N, int64_t O) {
    for (int64_t o = 0; o < O; o++) {
        double s = 0;
        for (int64_t n = 0; n < N; n++) s += d[n * O + o];
        db[o] += (float)s;
    }
}

// out[N,O] = inp[N,I] @ w[O,I]^T + bias; dinp += dout @ w; dw += dout^T @ inp; dbias += colsum(dout): the layer's
// products as matmul calls give the bits of the products written with k_gemm (the rows of out filled with the bias
// first, beta 1) and of the column sums in double, n in order (k_linear_fwd and k_linear_bwd, which are these calls)
static void linear_case(int64_t N, int64_t I, int64_t O, uint64_t key) {
    const char *mode = g_bf16 ? "bf16" : "fp32";
    float *x = rnd(N * I, key), *w = rnd(O * I, key + 1), *bias = rnd(O, key + 2), *dout = rnd(N * O, key + 3);
    float *out[2], *dx[2], *dw[2], *db[2];
    for (int i = 0; i < 2; i++) {
        out[i] = rnd(N * O, key + 4), dx[i] = rnd(N * I, key + 5), dw[i] = rnd(O * I, key + 6), db[i] = rnd(O, key + 7);
    }
    for (int64_t n = 0; n < N; n++) memcpy(out[0] + n * O, bias, sizeof(float) * (size_t)O);
    k_gemm_prec(g_bf16, 0, 1, N, O, I, 1.0f, x, I, w, I, 1.0f, out[0], O);
    k_gemm_prec(g_bf16, 0, 0, N, I, O, 1.0f, dout, O, w, I, 1.0f, dx[0], I);
    k_gemm_prec(g_bf16, 1, 0, O, I, N, 1.0f, dout, O, x, I, 1.0f, dw[0], I);
    float *db0 = os_alloc(sizeof(float) * (size_t)O, "db0");
    memcpy(db0, db[0], sizeof(float) * (size_t)O);
    col_sums(db[0], dout, N, O);
    os_tensor vx = os_matf(x, N, I, I), vw = os_matf(w, O, I, I), vd = os_matf(dout, N, O, O);
    k_matmul_prec(g_bf16, os_matf(out[1], N, O, O), vx, os_tensor_t(vw), 1.0f, 0.0f, os_vecf(bias, O), os_tensor_none());
    k_matmul_prec(g_bf16, os_matf(dx[1], N, I, I), vd, vw, 1.0f, 1.0f, os_tensor_none(), os_tensor_none());
    k_matmul_prec(g_bf16, os_matf(dw[1], O, I, I), os_tensor_t(vd), vx, 1.0f, 1.0f, os_tensor_none(), os_vecf(db[1], O));
    CHECK(same(out[0], out[1], (int64_t)sizeof(float) * N * O), "%s linear %lldx%lldx%lld: forward with bias differs",
          mode, (long long)N, (long long)I, (long long)O);
    CHECK(same(dx[0], dx[1], (int64_t)sizeof(float) * N * I), "%s linear: dinp differs", mode);
    CHECK(same(dw[0], dw[1], (int64_t)sizeof(float) * O * I), "%s linear: dw differs", mode);
    CHECK(same(db[0], db[1], (int64_t)sizeof(float) * O), "%s linear: dbias differs", mode);
    // the bias gradient alone (c NULL: no product)
    memcpy(db[1], db0, sizeof(float) * (size_t)O);
    k_matmul_prec(g_bf16, os_tensor_none(), os_tensor_t(vd), vx, 1.0f, 0.0f, os_tensor_none(), os_vecf(db[1], O));
    CHECK(same(db[0], db[1], (int64_t)sizeof(float) * O), "%s linear: dbias alone differs", mode);
    os_free(x), os_free(w), os_free(bias), os_free(dout), os_free(db0);
    for (int i = 0; i < 2; i++) os_free(out[i]), os_free(dx[i]), os_free(dw[i]), os_free(db[i]);
}

// dbias[m] += sum_k a[m, k] for a row-major (and a bf16) a: the sum in double, k in order, added once
static void row_sums(void) {
    int64_t M = 37, K = 300, ld = K + 5;
    float *a = rnd(M * ld, 90), *db = rnd(M, 91), *want = os_alloc(sizeof(float) * (size_t)M, "want");
    uint16_t *a16 = to16(a, M * ld);
    float *aw = widened(a16, M * ld);
    for (int bf = 0; bf < 2; bf++) {
        float *got = rnd(M, 91);
        for (int64_t m = 0; m < M; m++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += (bf ? aw : a)[m * ld + k];
            want[m] = db[m] + (float)s;
        }
        os_tensor va = bf ? os_mat(a16, OS_BF16, M, K, ld) : os_matf(a, M, K, ld);
        float *b = rnd(K * 3, 92), *c = rnd(M * 3, 93);
        k_matmul_prec(g_bf16, os_matf(c, M, 3, 3), va, os_matf(b, K, 3, 3), 1.0f, 0.0f, os_tensor_none(), os_vecf(got, M));
        CHECK(same(got, want, (int64_t)sizeof(float) * M), "dbias of a row-major %s a: not the double row sums",
              bf ? "bf16" : "fp32");
        os_free(got), os_free(b), os_free(c);
    }
    os_free(a), os_free(db), os_free(want), os_free(a16), os_free(aw);
}

// beta 0 overwrites c (NaN before: not read) with the bits of zeroing c and accumulating (beta 1): a gradient's
// first product needs no zeroed buffer (model/linear.h os_linear_bwd_set). Shapes of the layer's backward (NN),
// long sums (the BLAS's K blocks), products cut over the threads, bf16 operands
static void overwrite_case(int ta, int tb, int64_t M, int64_t N, int64_t K, int abf, uint64_t key) {
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    float *a = rnd(ar * ac, key), *b = rnd(br * bc, key + 1);
    float *set = os_alloc(sizeof(float) * (size_t)(M * N), "set"), *acc = os_alloc(sizeof(float) * (size_t)(M * N), "acc");
    uint16_t *a16 = to16(a, ar * ac);
    for (int64_t i = 0; i < M * N; i++) set[i] = NAN, acc[i] = 0.0f;
    os_tensor va = abf ? os_mat(a16, OS_BF16, ar, ac, ac) : os_matf(a, ar, ac, ac), vb = os_matf(b, br, bc, bc);
    if (ta) va = os_tensor_t(va);
    if (tb) vb = os_tensor_t(vb);
    k_matmul_prec(g_bf16, os_matf(set, M, N, N), va, vb, 1.0f, 0.0f, os_tensor_none(), os_tensor_none());
    k_matmul_prec(g_bf16, os_matf(acc, M, N, N), va, vb, 1.0f, 1.0f, os_tensor_none(), os_tensor_none());
    CHECK(same(set, acc, (int64_t)sizeof(float) * M * N), "%s %c%c %lldx%lldx%lld a %s: beta 0 differs from zeroing "
          "and accumulating", g_bf16 ? "bf16" : "fp32", ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)M, (long long)N,
          (long long)K, abf ? "bf16" : "fp32");
    os_free(a), os_free(b), os_free(set), os_free(acc), os_free(a16);
}

// sizes of 0: nothing read or written, and K = 0 gives c = beta * c (beta 0 overwrites), as k_gemm
static void empty(void) {
    float c[6] = {1, 2, 3, 4, 5, 6}, a[1] = {0}, b[1] = {0};
    k_matmul_prec(g_bf16, os_matf(c, 0, 3, 3), os_matf(a, 0, 0, 1), os_matf(b, 0, 3, 3), 1.0f, 0.0f, os_tensor_none(),
             os_tensor_none());
    CHECK(c[0] == 1, "M = 0 wrote c");
    k_matmul_prec(g_bf16, os_matf(c, 2, 3, 3), os_matf(a, 2, 0, 1), os_matf(b, 0, 3, 3), 1.0f, 0.5f, os_tensor_none(),
             os_tensor_none());
    CHECK(c[0] == 0.5f && c[5] == 3.0f, "K = 0: c = beta c (got %g, %g)", c[0], c[5]);
}

int main(void) {
    const char *path = NULL;
    if (k_gemm_bf16_setup(os_knobs()->bf16_gemm, &path) < 0) return fprintf(stderr, "FAIL setup: %s\n", os_errmsg()), 1;
    printf("bf16 GEMM path: %s (%s)\n", path, k_gemm_bf16_impl());
    for (int bf16 = 0; bf16 < 2; bf16++) {
        g_bf16 = bf16;
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int ops = 0; ops < 4; ops++) {
                    uint64_t key = 100 * (uint64_t)(1 + bf16) + 16 * (uint64_t)(2 * ta + tb) + 4 * (uint64_t)ops;
                    product_case(ta, tb, 7, 13, 9, 3, 0.75f, 0.5f, ops & 1, ops >> 1, key);
                    product_case(ta, tb, 300, 200, 96, 1, 1.0f, 1.0f, ops & 1, ops >> 1, key + 1);   // cut over threads
                    product_case(ta, tb, 1, 131, 64, 0, 1.0f, 0.0f, ops & 1, ops >> 1, key + 2);     // one row
                }
        for (int t = 0; t < 4; t++)
            for (int abf = 0; abf < 2; abf++) {
                uint64_t key = 700 + 100 * (uint64_t)bf16 + 10 * (uint64_t)(2 * t + abf);
                overwrite_case(t >> 1, t & 1, 5, 7, 6, abf, key);
                overwrite_case(t >> 1, t & 1, 64, 48, 1000, abf, key + 1);   // long sums
                overwrite_case(t >> 1, t & 1, 20, 20, 10000, abf, key + 2);
                overwrite_case(t >> 1, t & 1, 300, 200, 96, abf, key + 3);   // cut over threads
            }
        linear_case(5, 7, 6, 500 + 10 * (uint64_t)bf16);
        linear_case(64, 96, 320, 600 + 10 * (uint64_t)bf16);
        row_sums();
        empty();
    }
    return check_report("test_matmul");
}
