// The CUDA backend's product and conversion members (cu_gemm.c): matmul (kernels.h k_matmul's definition) and cast
// on cuBLASLt and small kernels. fp32: exact (no TF32) unless opened with tf32. bf16 (the precision the backend was
// opened with, cu_gemm_set_bf16; --torch_dtype bfloat16): fp32 operands rounded to bf16 (round to nearest even, as
// the CPU) into scratch, bf16 operands read as they are, fp32 accumulation. The members are declared by cu_ops.h
// from the seam's list.
#pragma once
#include "cuda/cu_ops.h"
#include <stdint.h>

int cu_gemm_open(int tf32);   // cuBLASLt opened; 0 or -1 with the reason in os_errmsg
void cu_gemm_set_bf16(int bf16);   // the products' precision, set when the backend opens (0 fp32, 1 bf16)
