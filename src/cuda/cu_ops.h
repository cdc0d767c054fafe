// The CUDA kernels of the device seam (kernels/ops.h), one cu_<member> for every compute member of os_ops except the
// GEMMs (gemm*, linear_*: cuBLASLt, cudacore's files), with exactly the member's arguments: os_ops_cuda() puts them
// in its table as they are. Shapes, NULL rules and accumulate rules are those of the CPU kernel of the same name in
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
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// buffers (cu_elementwise.cu)
void cu_zero(float *x, int64_t n);
void cu_copy(float *dst, const float *src, int64_t n);
void cu_to_bf16(uint16_t *dst, const float *src, int64_t n);
// attention (cu_attention.cu): stats holds the log-sum-exp [B,H,T] of each query row (-inf: a row with no key)
int64_t cu_attention_stats_floats(int64_t B, int64_t T, int64_t H);
// the precision the backend was opened with (os_cuda_open; 1: bf16 mixed precision, where the tensor cores take
// attention for the head dims they are built for)
void cu_attention_set_bf16(int bf16);
void cu_attention_fwd(float *out, float *stats, const float *q, const float *k, const float *v, const uint8_t *keymask,
                      const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D);
void cu_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                      const float *v, const float *out, const float *stats, const uint8_t *keymask,
                      const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D);
void cu_attention_cached_fwd(float *out, const float *q, const float *kc, const float *vc, int64_t B, int64_t T,
                             int64_t p0, int64_t S, int64_t H, int64_t KH, int64_t D);
// norms (cu_norm.cu)
void cu_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w, int64_t N, int64_t C, float eps);
void cu_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd,
                    int64_t N, int64_t C);
void cu_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                      int64_t N, int64_t C, float eps);
// rope (cu_rope.cu)
void cu_rope_table(float *cos_t, float *sin_t, const int32_t *pos, int64_t T, int64_t D, float theta);
void cu_rope_fwd(float *x, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H, int64_t D);
void cu_rope_bwd(float *dx, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H, int64_t D);
// embedding (cu_embedding.cu)
void cu_embedding_fwd(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale);
void cu_embedding_acc(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale);
void cu_embedding_bwd(float *dtable, const int32_t *ids, const float *dout, int64_t N, int64_t C, float scale);
// activations, dropout, transpose, convolution (cu_activation.cu, cu_conv1d.cu)
void cu_swiglu_fwd(float *out, const float *gate, const float *up, int64_t N);
void cu_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t N);
void cu_gelu_fwd(float *out, const float *inp, int64_t N);
void cu_relu_fwd(float *out, const float *inp, int64_t N);
void cu_relu_grad(float *dy, const float *y, int64_t N);
void cu_dropout(float *out, const float *inp, int64_t N, float p, uint64_t key, int acc);   // cu_dropout.cu
void cu_transpose(float *out, const float *inp, int64_t nb, int64_t R, int64_t C);          // cu_reshape.cu
void cu_conv1d_fwd(float *out, const float *inp, const float *w, const float *b, int64_t Cin, int64_t Tin,
                   int64_t Cout, int64_t K, int64_t stride, int64_t pad);
// softmax cross-entropy on a chunk of rows (cu_xent.cu): *sum += the rows' loss, *ncorrect += their correct argmax
void cu_xent_fwd_bwd(float *logits, int64_t ld, const int32_t *labels, int64_t N, int64_t V, float dscale,
                     double *sum, int64_t *ncorrect);
// elementwise (cu_elementwise.cu)
void cu_add(float *out, const float *a, const float *b, int64_t N);
void cu_axpy(float *y, float a, const float *x, int64_t N);
void cu_scale(float *x, float a, int64_t N);
void cu_sumsq(const float *x, int64_t N, double *out);
void cu_first_nonfinite(const float *x, int64_t N, int64_t *out);
// optimizer (cu_adamw.cu)
void cu_adamw(float *p, float *g, float *m, float *v, int64_t n, float lr, float b1, float b2, float eps, float wd,
              float gscale, int64_t step);

#ifdef __cplusplus
}
#endif
