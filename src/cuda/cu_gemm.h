// The CUDA backend's product members (cu_gemm.c): the seam's gemm family with the CPU backend's semantics
// (kernels.h k_gemm, k_gemm_bf16_*, k_linear_*), on cuBLASLt. fp32: exact (no TF32) unless opened with tf32.
// bf16 (the precision the backend was opened with, cu_gemm_set_bf16; --torch_dtype bfloat16): both
// operands rounded to bf16 (round to nearest even, as the CPU) and multiplied with fp32 accumulation; a bound or
// pinned operand is read from its rounded copy, any other is rounded into scratch first. Bound copies hold bf16
// bits (gemm_bound_esz 2; gemm_widen does nothing). The members (cu_gemm, cu_linear_fwd, ...) are declared by
// cu_ops.h from the seam's list; to_bf16 is cu_to_bf16 of cu_elementwise.cu.
#pragma once
#include "cuda/cu_ops.h"
#include <stdint.h>

int cu_gemm_open(int tf32);   // cuBLASLt opened; 0 or -1 with the reason in os_errmsg
