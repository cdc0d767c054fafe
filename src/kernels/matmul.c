// The CPU's matrix products: k_gemm (OpenBLAS sgemm cut over the threads, gemm.c; in bf16 mode gemm_bf16.c rounding
// the operands) and k_matmul (kernels.h), the seam's matmul on typed views (core/tensor.h). fp32 operands take
// k_gemm's paths; bf16 operands are read as the bf16 path's rounded operands (k_gemm_rounded: oneDNN reads the
// bits, the sgemm path their values widened to fp32 here), or in fp32 mode widened and multiplied exactly. A bf16
// output is the fp32 result rounded once.
#include "kernels/kernels.h"
#include "core/alloc.h"
#include "core/err.h"
#include "kernels/gemm.h"
#include <omp.h>
#include <string.h>

// c[M,N] = alpha * op(a) @ op(b) + beta * c. Sizes of 0 are allowed (BLAS would reject lda = 0).
// bf16 1: the inputs are rounded to bf16 (gemm_bf16.c).
void k_gemm_prec(int bf16, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
            const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {   // op(a) @ op(b) is all zeros: c = beta * c (beta 0 overwrites, as BLAS does)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
        return;
    }
    k_gemm_blas_single_thread();
    k_gemm_op g = {ta, tb, M, N, K, alpha, beta, a, b, lda, ldb, ldc, c, (int)sizeof(float)};
    double t0 = k_gemm_times_start();
    if (bf16)
        k_gemm_bf16(&g);
    else
        k_gemm_run(&g, k_gemm_sgemm);
    k_gemm_times_end(t0, &g, bf16);
}

void k_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
            const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    k_gemm_prec(0, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

static _Thread_local void *scr[3];   // 0, 1: a and b widened to fp32; 2: the fp32 result of a bf16 output
static _Thread_local size_t scr_cap[3];

static void *scratch(int i, size_t bytes) {
    if (bytes > scr_cap[i]) {
        os_free(scr[i]);
        scr[i] = os_alloc(bytes, "matmul scratch");
        scr_cap[i] = bytes;
    }
    return scr[i];
}

static inline float widen1(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// dst[rows, cols] (packed, fp32) = the bf16 src[rows, cols] (row stride ld), exactly
static void widen_rows(float *dst, const uint16_t *src, int64_t rows, int64_t cols, int64_t ld) {
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && rows * cols >= K_PAR_MIN)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) dst[r * cols + j] = widen1(src[r * ld + j]);
}

static inline double at(const os_tensor *v, int64_t i) {
    return v->dtype == OS_BF16 ? widen1(((const uint16_t *)v->data)[i]) : ((const float *)v->data)[i];
}

// dbias[m] += sum over k of a[m, k], summed in double with k in order, then rounded once (k_linear_bwd's column
// sums of dout when a = dout^T: its columns blocked, each thread summing BLK of them row by row)
static void bias_grad(float *dbias, const os_tensor *a, int64_t M, int64_t K) {
    int64_t sm = a->stride[0], sk = a->stride[1];
    if (sm == 1) {
        enum { BLK = 256 };
#pragma omp parallel for schedule(static)
        for (int64_t o0 = 0; o0 < M; o0 += BLK) {
            int64_t o1 = o0 + BLK < M ? o0 + BLK : M;
            double acc[BLK] = {0};
            for (int64_t n = 0; n < K; n++)
                for (int64_t o = o0; o < o1; o++) acc[o - o0] += at(a, n * sk + o);
            for (int64_t o = o0; o < o1; o++) dbias[o] += (float)acc[o - o0];
        }
        return;
    }
#pragma omp parallel for schedule(static) if (M * K >= K_PAR_MIN)
    for (int64_t m = 0; m < M; m++) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++) acc += at(a, m * sm + k * sk);
        dbias[m] += (float)acc;
    }
}

static void shape_die(const char *what, const os_tensor *v, int64_t r, int64_t c) {
    os_die("matmul: %s is a %dD view [%lld, %lld] (strides %lld, %lld), expected a matrix [%lld, %lld] with one "
           "unit stride", what, v->ndim, (long long)v->shape[0], (long long)(v->ndim > 1 ? v->shape[1] : 0),
           (long long)v->stride[0], (long long)(v->ndim > 1 ? v->stride[1] : 0), (long long)r, (long long)c);
}

void k_matmul_check(const os_tensor *c, const os_tensor *a, const os_tensor *b, float beta, const os_tensor *bias,
                    const os_tensor *dbias, k_matmul_shape *s) {
    s->M = a->shape[0], s->K = a->shape[1], s->N = b->ndim == 2 ? b->shape[1] : -1;
    if (a->ndim != 2 || os_mat_layout(a, &s->ta, &s->lda) < 0) shape_die("a", a, s->M, s->K);
    if (b->ndim != 2 || b->shape[0] != s->K || os_mat_layout(b, &s->tb, &s->ldb) < 0) shape_die("b", b, s->K, s->N);
    int tc = 0;
    s->ldc = 0;
    if (c->data && (c->ndim != 2 || c->shape[0] != s->M || c->shape[1] != s->N || os_mat_layout(c, &tc, &s->ldc) < 0 ||
                    tc))
        shape_die("c (row-major)", c, s->M, s->N);
    if (bias->data && (bias->dtype != OS_F32 || bias->ndim != 1 || bias->shape[0] != s->N || bias->stride[0] != 1))
        os_die("matmul: bias must be an fp32 vector [%lld]", (long long)s->N);
    if (bias->data && beta != 0.0f) os_die("matmul: bias with beta %g (the rows start from the bias: beta 0)", beta);
    if (dbias->data && (dbias->dtype != OS_F32 || dbias->ndim != 1 || dbias->shape[0] != s->M || dbias->stride[0] != 1))
        os_die("matmul: dbias must be an fp32 vector [%lld]", (long long)s->M);
}

// operand v stored [rows, cols] (row stride *ld): its data, or for a bf16 v read in esz-4 format (the sgemm path
// of bf16 mode, or fp32 mode) its values widened into scratch i (packed: *ld = cols)
static const void *bf16_operand(int i, const os_tensor *v, int64_t rows, int64_t cols, int64_t *ld, int64_t esz) {
    if (v->dtype != OS_BF16 || esz != 4) return v->data;
    float *w = scratch(i, 4 * (size_t)(rows * cols));
    widen_rows(w, v->data, rows, cols, *ld);
    *ld = cols;
    return w;
}

// c[M,N] (fp32, row stride ldc) = alpha * op(a) @ op(b) + beta * c with a, b as the views give them
static void product(int on, const k_matmul_shape *s, const os_tensor *a, const os_tensor *b, float alpha, float beta,
                    float *c, int64_t ldc) {
    int64_t M = s->M, N = s->N, K = s->K, lda = s->lda, ldb = s->ldb;
    int abf = a->dtype == OS_BF16, bbf = b->dtype == OS_BF16;
    if ((!abf && !bbf) || K <= 0) {
        k_gemm_prec(on, s->ta, s->tb, M, N, K, alpha, a->data, lda, b->data, ldb, beta, c, ldc);
        return;
    }
    int64_t esz = on ? k_gemm_bf16_esz() : 4;   // the format the products read rounded operands in
    const void *pa = bf16_operand(0, a, s->ta ? K : M, s->ta ? M : K, &lda, esz);
    const void *pb = bf16_operand(1, b, s->tb ? N : K, s->tb ? K : N, &ldb, esz);
    int pre = abf | bbf << 1;
    if (on) k_gemm_rounded(pre, s->ta, s->tb, M, N, K, alpha, pa, lda, pb, ldb, beta, c, ldc);
    else k_gemm(s->ta, s->tb, M, N, K, alpha, pa, lda, pb, ldb, beta, c, ldc);   // exact values: fp32 products
}

void k_matmul_prec(int bf16, os_tensor c, os_tensor a, os_tensor b, float alpha, float beta, os_tensor bias,
                   os_tensor dbias) {
    k_matmul_shape s;
    k_matmul_check(&c, &a, &b, beta, &bias, &dbias, &s);
    int64_t M = s.M, N = s.N;
    if (dbias.data) bias_grad(dbias.data, &a, M, s.K);
    if (!c.data || M <= 0 || N <= 0) return;
    float *cf = c.data;
    int64_t ldc = s.ldc;
    if (c.dtype == OS_BF16) {   // the fp32 result in scratch, rounded into c once
        cf = scratch(2, sizeof(float) * (size_t)(M * N)), ldc = N;
        if (beta != 0.0f) widen_rows(cf, c.data, M, N, s.ldc);
    }
    if (bias.data) {   // the rows start from the bias, the product accumulates onto it (k_linear_fwd's order)
        const float *bv = bias.data;
#pragma omp parallel for schedule(static)
        for (int64_t n = 0; n < M; n++)
            for (int64_t o = 0; o < N; o++) cf[n * ldc + o] = bv[o];
        beta = 1.0f;
    }
    product(bf16, &s, &a, &b, alpha, beta, cf, ldc);
    if (c.dtype == OS_BF16)
        for (int64_t r = 0; r < M; r++) k_bf16_round((uint16_t *)c.data + r * s.ldc, cf + r * N, N);
}

// the rows and columns of a vector or row-major matrix view, its row stride; 0, or -1 for another view
static int rows_of(const os_tensor *v, int64_t *rows, int64_t *cols, int64_t *ld) {
    if (v->ndim == 1 && v->stride[0] == 1) return *rows = 1, *cols = *ld = v->shape[0], 0;
    if (v->ndim != 2 || v->stride[1] != 1) return -1;
    *rows = v->shape[0], *cols = v->shape[1], *ld = v->stride[0];
    return 0;
}

void k_cast(os_tensor dst, os_tensor src) {
    int64_t r, c, ld, sr, sc, sld;
    if (rows_of(&dst, &r, &c, &ld) < 0 || rows_of(&src, &sr, &sc, &sld) < 0 || r != sr || c != sc)
        os_die("cast: dst and src must be vectors or row-major matrices of one shape (dst %dD [%lld, ..], src %dD "
               "[%lld, ..])", dst.ndim, (long long)dst.shape[0], src.ndim, (long long)src.shape[0]);
    if (r <= 0 || c <= 0) return;
    int fd = dst.dtype == OS_F32, fs = src.dtype == OS_F32;
    int64_t e = os_dtype_bytes(dst.dtype);
    int par = !omp_in_parallel() && r * c >= (1 << 16);
#pragma omp parallel for schedule(static) if (par && r > 1)
    for (int64_t i = 0; i < r; i++) {
        if (!fd && fs) k_bf16_round((uint16_t *)dst.data + i * ld, (const float *)src.data + i * sld, c);
        else if (fd && !fs)
            for (int64_t j = 0; j < c; j++) ((float *)dst.data)[i * ld + j] = widen1(((const uint16_t *)src.data)[i * sld + j]);
        else memcpy((char *)dst.data + i * ld * e, (const char *)src.data + i * sld * e, (size_t)(c * e));
    }
}

void k_matmul(os_tensor c, os_tensor a, os_tensor b, float alpha, float beta, os_tensor bias, os_tensor dbias) {
    k_matmul_prec(0, c, a, b, alpha, beta, bias, dbias);
}
