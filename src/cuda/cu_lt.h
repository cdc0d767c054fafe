// cuBLASLt for the CUDA backend's products (cu_lt.c): libcublasLt.so.13 opened at run time (dlopen; why: docs/
// design.md "The CUDA backend"), one matmul per call on cu_stream(), its plan (descriptors and the heuristic's
// algorithm) cached per shape.
#pragma once
#include <stdint.h>

// opens the library and a handle (once); 0, or -1 with the reason in os_errmsg (where it looked)
int cu_lt_open(void);
// row-major c[M,N] = alpha * op(a)[M,K] @ op(b)[K,N] + beta * c (op(x) = x^T when t*); lda/ldb/ldc row strides in
// elements. a and b are floats (bf16 0) or bf16 bits (bf16 1), c floats; M, N, K > 0. Accumulation in fp32;
// tf32 1 lets fp32 inputs be rounded to TF32 on the tensor cores (--tf32 true), 0 keeps fp32 exact. bias (fp32 [N],
// or NULL): added to every row of the result by cuBLASLt's bias epilogue (c = alpha op(a) op(b) + beta c + bias).
// 0, or -1 (nothing computed) when cuBLASLt has no algorithm for the product with its bias epilogue.
typedef struct {
    int ta, tb;
    int64_t M, N, K;
    float alpha, beta;
    const void *a, *b;
    int64_t lda, ldb, ldc;
    float *c;
    int bf16, tf32;
    const float *bias;
} cu_matmul_op;
int cu_lt_matmul(const cu_matmul_op *g);
