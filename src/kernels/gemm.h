// The product seam (gemm.c) shared by the fp32 (linear.c) and bf16 (gemm_bf16.c) paths of k_gemm: one row-major product
// described once, cut over the OpenMP threads by k_gemm_run, each block computed by a single-threaded kernel.
#pragma once
#include <oneapi/dnnl/dnnl.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int ta, tb;             // op(a) = a^T, op(b) = b^T
    int64_t M, N, K;        // c[M,N] = alpha * op(a)[M,K] @ op(b)[K,N] + beta * c
    float alpha, beta;
    const void *a, *b;      // elements of esz bytes (4: float; 2: bf16 bits)
    int64_t lda, ldb, ldc;  // row strides in elements
    float *c;
    int esz;
} k_gemm_op;

typedef void k_gemm_kernel(const k_gemm_op *g);   // the whole of g on the calling thread

// Products of at least 4 MFLOP cut along the longer of M and N into one block per OpenMP thread (gemm.c); every
// element of c is summed in the same order however the product is cut. M, N, K > 0.
void k_gemm_run(const k_gemm_op *g, k_gemm_kernel *kern);
// the part of g in rows (M > N) or else columns [lo, lo + n) of c, the way k_gemm_run cuts it: a product of its own
k_gemm_op k_gemm_part(const k_gemm_op *g, int64_t lo, int64_t n);
// OpenBLAS set to one thread (once; gemm.c says why): before any product
void k_gemm_blas_single_thread(void);
// OpenBLAS sgemm of a float op (esz 4), single-threaded; a row's bits do not depend on the rows beside it (a small
// product runs padded: gemm.c)
void k_gemm_sgemm(const k_gemm_op *g);
// *buf grown to at least bytes (the old contents dropped; *cap its size), for per-thread scratch kept between calls
void *k_scratch(void **buf, size_t *cap, size_t bytes, const char *what);
// g computed by kern with zero rows added below op(a)'s (to m_min rows) and zero columns right of op(b)'s (to n_min),
// on per-thread scratch (the operands' transposes kept), the added rows and columns of c dropped: for kernels whose
// sums for a row of c depend on how few rows (columns) the product has
void k_gemm_padded(const k_gemm_op *g, int64_t m_min, int64_t n_min, k_gemm_kernel *kern);
// k_gemm in bf16 (gemm_bf16.c): op(a) and op(b) rounded to bf16, products accumulated in fp32
void k_gemm_bf16(const k_gemm_op *g);
// oneDNN's matmul primitive for g's product (g->a, b, c unused): inputs of type in (dnnl_bf16 or dnnl_f32),
// f32 c; md[] receives a, b, c's memory descriptors, impl_name (when not NULL) the kernel's name. NULL, or what failed.
const char *k_onednn_matmul(dnnl_engine_t eng, const k_gemm_op *g, dnnl_data_type_t in, dnnl_primitive_t *p,
                            dnnl_memory_desc_t md[3], char impl_name[64]);
// k_gemm_times_enable() (OMNISHARD_GEMM_TIMES=1, called once at start; gemm_times.c): start returns a time stamp (0 when off or inside a parallel region); end
// adds the product g since then to its shape's row of the table printed at exit. kind: 0 fp32, 1 bf16, 2-4 bf16 with
// a, b or both rounded by the caller (k_gemm_rounded's pre + 1).
void k_gemm_times_enable(void);
double k_gemm_times_start(void);
void k_gemm_times_end(double t0, const k_gemm_op *g, int kind);
