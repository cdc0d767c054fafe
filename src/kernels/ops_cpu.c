// The CPU backend of the device seam (kernels/ops.h): the kernels of kernels.h on host memory.
#include "kernels/ops.h"
#include "core/alloc.h"
#include "kernels/kernels.h"
#include <string.h>

static void *alloc(int64_t bytes, const char *what) { return os_alloc((size_t)bytes, what); }
static void *alloc_uninit(int64_t bytes, const char *what) { return os_alloc_uninit((size_t)bytes, what); }
static void *alloc_sparse(int64_t bytes, const char *what) { return os_alloc_lazy((size_t)bytes, what); }
static void move(void *dst, const void *src, int64_t bytes) { memcpy(dst, src, (size_t)bytes); }   // up and down
static void xent(float *logits, int64_t ld, const int32_t *labels, int64_t N, int64_t V, float dscale, double *sum,
                 int64_t *ncorrect) {
    *sum += k_xent_fwd_bwd(logits, ld, labels, N, V, dscale, ncorrect);
}
static void sumsq(const float *x, int64_t N, double *out) { *out = k_sumsq(x, N); }
static void first_nonfinite(const float *x, int64_t N, int64_t *out) { *out = k_first_nonfinite(x, N); }

static void zero(float *x, int64_t n) { memset(x, 0, sizeof(float) * (size_t)n); }
static void copy(float *dst, const float *src, int64_t n) { memcpy(dst, src, sizeof(float) * (size_t)n); }

const os_ops os_ops_cpu = {
    .name = "cpu",
    .alloc = alloc,
    .alloc_uninit = alloc_uninit,
    .alloc_sparse = alloc_sparse,
    .free = os_free,
    .host_memory = 1,
    .upload = move,
    .download = move,
    .zero = zero,
    .copy = copy,
    .gemm = k_gemm,
    .gemm_pin = k_gemm_bf16_pin,
    .gemm_unpin = k_gemm_bf16_unpin,
    .to_bf16 = k_bf16_round,
    .gemm_bound_esz = k_gemm_bf16_esz,
    .gemm_widen = k_gemm_bf16_widen,
    .gemm_bind = k_gemm_bf16_bind,
    .gemm_unbind = k_gemm_bf16_unbind,
    .gemm_rounds = k_gemm_rounds,
    .gemm_round = k_gemm_round,
    .gemm_rounded = k_gemm_rounded,
    .linear_fwd = k_linear_fwd,
    .linear_bwd = k_linear_bwd,
    .matmul = k_matmul,
    .attention_stats_floats = k_attention_stats_floats,
    .attention_fwd = k_attention_fwd,
    .attention_bwd = k_attention_bwd,
    .attention_cached_fwd = k_attention_cached_fwd,
    .rmsnorm_fwd = k_rmsnorm_fwd,
    .rmsnorm_bwd = k_rmsnorm_bwd,
    .layernorm_fwd = k_layernorm_fwd,
    .rope_table = k_rope_table,
    .rope_fwd = k_rope_fwd,
    .rope_bwd = k_rope_bwd,
    .embedding_fwd = k_embedding_fwd,
    .embedding_acc = k_embedding_acc,
    .embedding_bwd = k_embedding_bwd,
    .swiglu_fwd = k_swiglu_fwd,
    .swiglu_bwd = k_swiglu_bwd,
    .gelu_fwd = k_gelu_fwd,
    .relu_fwd = k_relu_fwd,
    .relu_grad = k_relu_grad,
    .dropout = k_dropout,
    .transpose = k_transpose,
    .conv1d_fwd = k_conv1d_fwd,
    .xent_fwd_bwd = xent,
    .add = k_add,
    .axpy = k_axpy,
    .scale = k_scale,
    .sumsq = sumsq,
    .first_nonfinite = first_nonfinite,
    .adamw = k_adamw,
};

const os_ops *os_k = &os_ops_cpu;
