// The CUDA backend's product members (cu_gemm.c): the seam's gemm family with the CPU backend's semantics
// (kernels.h k_gemm, k_gemm_bf16_*, k_linear_*), on cuBLASLt. fp32: exact (no TF32) unless opened with tf32.
// bf16 (the precision the backend was opened with, cu_gemm_set_bf16; --torch_dtype bfloat16): both
// operands rounded to bf16 (round to nearest even, as the CPU) and multiplied with fp32 accumulation; a bound or
// pinned operand is read from its rounded copy, any other is rounded into scratch first. Bound copies hold bf16
// bits (gemm_bound_esz 2; gemm_widen does nothing). to_bf16 is cu_to_bf16 of cu_ops.h.
#pragma once
#include "core/tensor.h"
#include <stdint.h>

int cu_gemm_open(int tf32);   // cuBLASLt opened; 0 or -1 with the reason in os_errmsg
void cu_gemm_set_bf16(int bf16);   // the products' precision (os_cuda_open's: 1 bf16 mixed precision, 0 fp32)
void cu_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
             const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
void cu_gemm_pin(const float *w, int64_t rows, int64_t cols, int64_t ld);
void cu_gemm_unpin(void);
int64_t cu_gemm_bound_esz(void);
void cu_gemm_widen(void *buf, int64_t n);
void cu_gemm_bind(const float *w, int64_t n, const void *rounded);
void cu_gemm_unbind(const float *w);
int64_t cu_gemm_rounds(void);
void cu_gemm_round(void *dst, const float *src, int64_t rows, int64_t cols, int64_t ld);
void cu_gemm_rounded(int pre, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *a,
                     int64_t lda, const void *b, int64_t ldb, float beta, float *c, int64_t ldc);
void cu_linear_fwd(float *out, const float *inp, const float *w, const float *bias, int64_t N, int64_t I, int64_t O);
void cu_linear_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                   int64_t N, int64_t I, int64_t O);
// the seam's matmul (k_matmul's definition) on cuBLASLt
void cu_matmul(os_tensor c, os_tensor a, os_tensor b, float alpha, float beta, os_tensor bias, os_tensor dbias);
