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
// dbias[O] += sum over n of dout[n, O], summed in double (as k_linear_bwd)
void cu_colsum_add(float *dbias, const float *dout, int64_t N, int64_t O);
// c[M, N] (row stride ldc) = beta * c, or 0 where beta is 0 (a product with K = 0)
void cu_scale_rows(float *c, int64_t M, int64_t N, int64_t ldc, float beta);
#ifdef __cplusplus
}
#endif
