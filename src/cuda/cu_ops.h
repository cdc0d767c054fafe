// The CUDA kernels of the device seam (kernels/ops.h), one cu_<member> for every member of os_ops but the memory
// ones (the products on cuBLASLt: cu_gemm.c), declared from the seam's list with exactly the member's arguments:
// os_ops_cuda() puts them in its table as they are. Shapes, NULL rules and accumulate rules are those of the CPU kernel of the same name in
// kernels/kernels.h; read the two side by side (src/kernels/<op>.c and src/cuda/cu_<op>.cu).
// Every pointer argument is device memory. Every call is asynchronous: it enqueues its kernels on cu_stream() and
// returns (no host synchronisation, no copy to the host); a launch error ends the process with a message naming
// the kernel. Reductions (xent_fwd_bwd, sumsq) write device scalars in a fixed order (no atomics whose order varies
// between runs): the same inputs give the same bits on every run.
// Attention keeps no T x T matrix: attention_fwd saves the log-sum-exp of each query row in stats [B,H,T]
// (cu_attention_stats_floats) and attention_bwd recomputes the probabilities from it.
// The expected difference from the CPU kernel of each op (fp32 sums in another order, libdevice's expf/erff) is
// written at the op in its .cu file and listed in docs/design.md "CUDA kernels".
#pragma once
#include "kernels/ops_list.h"
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// cu_<member>(its arguments) for every member but the memory ones (kernels/ops_list.h: one line each, with its
// shapes): the products in cu_gemm.c, buffers and elementwise in cu_elementwise.cu, attention in cu_attention.cu,
// norms in cu_norm.cu, rope in cu_rope.cu, embedding in cu_embedding.cu, row gathers, scatter-adds and row
// broadcasts in cu_rows.cu, activations in cu_activation.cu, dropout in cu_dropout.cu, transpose in cu_reshape.cu,
// convolution in cu_conv1d.cu, cross-entropy in cu_xent.cu, AdamW in cu_adamw.cu. attention's stats: the log-sum-exp [B,H,T] of each query row (-inf: a row with no key).
#define CU_DECLARE(name, R, GUARD, CPU, ...) CU_DECLARE_##GUARD(name, R, __VA_ARGS__)
#define CU_DECLARE_MEM(name, R, ...)
#define CU_DECLARE_ASK(name, R, ...) OS_T(R) cu_##name(OS_PARAMS(__VA_ARGS__));
#define CU_DECLARE_RUN(name, R, ...) OS_T(R) cu_##name(OS_PARAMS(__VA_ARGS__));
#define CU_DECLARE_OWN(name, R, ...) OS_T(R) cu_##name(OS_PARAMS(__VA_ARGS__));
OS_OPS_LIST(CU_DECLARE)
// the precision the backend was opened with (os_cuda_open; 1: bf16 mixed precision), for the kernels with products
// (the list's KB members; matmul's is cu_gemm_set_bf16): attention (the tensor cores take it for the head dims they
// are built for) and conv1d (its operands rounded to bf16 as the CPU's bf16 table rounds them)
void cu_attention_set_bf16(int bf16);
void cu_conv1d_set_bf16(int bf16);

#ifdef __cplusplus
}
#endif
