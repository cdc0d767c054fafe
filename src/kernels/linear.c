// Linear layers and general matrix products (row-major, weights w[O,I] as in PyTorch): k_gemm on OpenBLAS sgemm
// cut over the threads (gemm.c), in bf16 by gemm_bf16.c under k_gemm_set_bf16.
#include "kernels/kernels.h"
#include "kernels/gemm.h"

// c[M,N] = alpha * op(a) @ op(b) + beta * c. Sizes of 0 are allowed (BLAS would reject lda = 0).
// Under k_gemm_set_bf16(1) the inputs are rounded to bf16 (gemm_bf16.c).
void k_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
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
    int bf16 = k_gemm_bf16_on();
    if (bf16)
        k_gemm_bf16(&g);
    else
        k_gemm_run(&g, k_gemm_sgemm);
    k_gemm_times_end(t0, &g, bf16);
}

// out[N,O] = inp[N,I] @ w[O,I]^T + bias[O]
void k_linear_fwd(float *out, const float *inp, const float *w, const float *bias, int64_t N, int64_t I, int64_t O) {
    if (N <= 0 || O <= 0) return;
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int64_t n = 0; n < N; n++)
            for (int64_t o = 0; o < O; o++) out[n * O + o] = bias[o];
    }
    k_gemm(0, 1, N, O, I, 1.0f, inp, I, w, I, bias ? 1.0f : 0.0f, out, O);
}

// dinp[N,I] += dout[N,O] @ w[O,I];  dw[O,I] += dout^T @ inp;  dbias[O] += column sums of dout (in double)
void k_linear_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                  int64_t N, int64_t I, int64_t O) {
    if (dinp) k_gemm(0, 0, N, I, O, 1.0f, dout, O, w, I, 1.0f, dinp, I);
    if (dw) k_gemm(1, 0, O, I, N, 1.0f, dout, O, inp, I, 1.0f, dw, I);
    if (dbias) {
        enum { BLK = 256 };
#pragma omp parallel for schedule(static)
        for (int64_t o0 = 0; o0 < O; o0 += BLK) {
            int64_t o1 = o0 + BLK < O ? o0 + BLK : O;
            double acc[BLK] = {0};
            for (int64_t n = 0; n < N; n++)
                for (int64_t o = o0; o < o1; o++) acc[o - o0] += dout[n * O + o];
            for (int64_t o = o0; o < o1; o++) dbias[o] += (float)acc[o - o0];
        }
    }
}
