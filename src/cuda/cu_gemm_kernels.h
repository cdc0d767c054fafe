// The small kernels of the CUDA backend's products (cu_gemm_kernels.cu), issued on cu_stream(); sizes > 0.
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
// dst[rows, cols] (packed) = bf16 bits of src[rows, cols] (row stride ld), round to nearest even (a NaN stays a
// quiet NaN), as k_bf16_round
void cu_round_rows(uint16_t *dst, const float *src, int64_t rows, int64_t cols, int64_t ld);
// out[N, O] = bias[O] in every row
void cu_fill_rows(float *out, const float *bias, int64_t N, int64_t O);
// dbias[m] += sum over k of a[m * sm + k * sk] (m < M, k < K), summed in double with k in order (k_matmul's dbias;
// a linear layer's column sums of dout [N, O]: M = O, K = N, sm = 1, sk = O); a: floats (bf16 0) or bf16 bits
// (bf16 1: their values, exact in double)
void cu_bias_grad(float *dbias, const void *a, int bf16, int64_t M, int64_t K, int64_t sm, int64_t sk);
// dst[rows, cols] (packed) = the bf16 bits src[rows, cols] (row stride ld) as floats, exactly
void cu_widen_rows(float *dst, const uint16_t *src, int64_t rows, int64_t cols, int64_t ld);
// c[M, N] (row stride ldc) = beta * c, or 0 where beta is 0 (a product with K = 0)
void cu_scale_rows(float *c, int64_t M, int64_t N, int64_t ldc, float beta);
#ifdef __cplusplus
}
#endif
