// CPU kernels, forward and backward, fp32. Conventions (as in llm.c):
//  - shapes in comments: B batch, T time, C channels, H heads, KH key/value heads, D head dim, V vocab, N rows.
//  - every *_bwd ACCUMULATES (+=) into its gradient outputs (dinp, dw, db...): the caller zeroes them first; one
//    with an acc argument overwrites them when acc is 0 (the bits of zeroing them first).
//    A gradient pointer may be NULL: that gradient is then not computed.
//  - Linear weights use PyTorch's layout w[out, in].
//  - kernels parallelise with OpenMP / BLAS internally; they are safe to call with any sizes >= 0.
#pragma once
#include "kernels/ops_list.h"
#include "core/tensor.h"
#include <stdint.h>

// k_<member>(its arguments), for every member of the device seam the CPU backend runs as k_<member> (the list's
// CPU column K or KB: k_matmul, k_add, ...), and k_<member>_prec(int bf16, its arguments) for the members whose
// products take a precision (KB: k_matmul_prec, ...; see "precision" below); their shapes and rules are written
// here and at their lines there. A K member's k_<member>_prec names a type, so a kernel file that defines a
// precision variant for a member whose line says K does not compile ("redeclared as different kind of symbol"):
// its line must say KB, or the CPU backend opened in bf16 would run it in fp32
#define K_DECLARE(name, R, GUARD, CPU, ...) K_DECLARE_##CPU(name, R, __VA_ARGS__)
#define K_DECLARE_K(name, R, ...) OS_T(R) k_##name(OS_PARAMS(__VA_ARGS__)); typedef int k_##name##_prec;
#define K_DECLARE_KB(name, R, ...)                                                                                    \
    OS_T(R) k_##name(OS_PARAMS(__VA_ARGS__));                                                                         \
    OS_T(R) k_##name##_prec(int bf16, OS_PARAMS(__VA_ARGS__));
#define K_DECLARE_OWN(name, R, ...)
OS_OPS_LIST(K_DECLARE)

// ---- precision ----
// The kernels that multiply matrices take the precision of their products as an argument (the *_prec variants;
// the plain names are fp32): bf16 1 rounds each product's fp32 operands to bf16 (round to nearest even, as
// PyTorch's .to(torch.bfloat16)) and accumulates in fp32 (bf16 mixed precision, gemm_bf16.c). The CPU backend
// opened in bf16 (os_ops_cpu_open(1), kernels/ops.h) passes 1 from each of its members; nothing else sets it. The
// seam's members with a *_prec variant are those whose list line's CPU column is KB (declared from the list).

// ---- linear (BLAS sgemm), fp32: the CPU's functions, not the seam's (its callers use matmul) ----
// out[N,O] = inp[N,I] @ w[O,I]^T + bias[O] (bias may be NULL)
void k_linear_fwd(float *out, const float *inp, const float *w, const float *bias, int64_t N, int64_t I, int64_t O);
// dinp[N,I] += dout[N,O] @ w[O,I];  dw[O,I] += dout^T @ inp;  dbias[O] += sum_n dout[n,:]
void k_linear_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                  int64_t N, int64_t I, int64_t O);
// general row-major sgemm: c[M,N] = alpha * op(a) @ op(b) + beta * c, op(x) = x or x^T; lda/ldb/ldc row strides
// (k_matmul's product on fp32 operands; bf16 1: rounded to bf16 first)
void k_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
            const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
void k_gemm_prec(int bf16, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
// bf16 mixed precision (gemm_bf16.c). Call k_gemm_bf16_setup first: it picks the path ("onednn" where the CPU has
// bf16 instructions, else "sgemm": rounded values in fp32 sgemm), or the one forced (OMNISHARD_BF16_GEMM's value:
// onednn, onednn_gemm, onednn_matmul or sgemm; NULL: none); -1 with a message on another value or one the CPU cannot
// run. The first call decides.
int k_gemm_bf16_setup(const char *forced, const char **path);
// the path main forces once at start (OMNISHARD_BF16_GEMM's value; NULL: chosen from the CPU): what
// k_gemm_bf16_setup(NULL, ...) takes
void k_gemm_bf16_force(const char *forced);
int64_t k_gemm_bf16_esz(void);   // the bytes of a rounded operand on the path: 2 (onednn: bf16 bits) or 4 (sgemm: fp32)
void k_bf16_round(uint16_t *dst, const float *src, int64_t n);   // bf16 bits of src, round to nearest even
const char *k_gemm_bf16_impl(void);        // the kernel that runs, for the log
// Operands rounded before the product (k_matmul's bf16 operands): a bf16 k_gemm (K > 0) whose a (pre bit 0) and/or
// b (pre bit 1) are in the path's format already (k_gemm_bf16_esz bytes an element; row strides lda/ldb in
// elements); an operand not flagged is a float matrix rounded as k_gemm rounds it.
void k_gemm_rounded(int pre, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *a, int64_t lda,
                    const void *b, int64_t ldb, float beta, float *c, int64_t ldc);

// ---- matmul on typed views (matmul.c; the seam's matmul member, docs/design.md "Tensor views and the matmul
// member") ----
// c[M,N] = alpha * a[M,K] @ b[K,N] + beta * c: 2-D views (core/tensor.h), each with one unit stride (a transposed
// operand is os_tensor_t of the stored matrix), c row-major. a and b fp32 or bf16 in any mix, accumulated in fp32;
// c fp32 or bf16 (the fp32 result rounded once, round to nearest even). fp32 operands are multiplied as k_gemm
// multiplies them (rounded to bf16 in bf16 precision, k_matmul_prec); bf16 operands as they are (their values are
// exact in fp32). Options (os_tensor_none() when not taken):
//   bias  fp32 [N]: the rows of c start from it, the product accumulates onto it (beta must be 0):
//         c = bias + alpha * a @ b (k_linear_fwd's order)
//   dbias fp32 [M]: dbias[m] += sum over k of a[m, k], in double with k in order (a linear layer's bias gradient
//         when a = dout^T: k_linear_bwd's column sums), a fp32 or bf16 (its values summed; every backend)
// c with NULL data: no product (the dbias sums only). Sizes of 0 are allowed. A view of another shape or with no
// unit stride stops the program naming it (a caller's error).
// k_matmul(...): declared from the seam's list (kernels/ops_list.h)
// k_matmul_prec(int bf16, ...): declared from the seam's list (KB)
// the product's dimensions and its operands as BLAS reads them (trans, row stride), from views checked as k_matmul
// checks them (shared with the CUDA backend's matmul)
typedef struct {
    int64_t M, N, K, lda, ldb, ldc;
    int ta, tb;
} k_matmul_shape;
void k_matmul_check(const os_tensor *c, const os_tensor *a, const os_tensor *b, float beta, const os_tensor *bias,
                    const os_tensor *dbias, k_matmul_shape *s);

// ---- embedding ----
// out[B*L, C] = the sum over the R rows of ids [B, R, L] of scale * table[id, :]   (ids checked by the caller)
// k_embedding_fwd(...): declared from the seam's list (kernels/ops_list.h)
// dtable[ids[k], :] += scale * dout[rows[j], :] for the rows j of each distinct table row k, in order
// k_embedding_bwd(...): declared from the seam's list (kernels/ops_list.h)

// ---- RMSNorm (Qwen2: y = x * rsqrt(mean(x^2) + eps) * w) ----
// out[N,C], rstd[N] saved for backward
// k_rmsnorm_fwd(...): declared from the seam's list (kernels/ops_list.h)
// k_rmsnorm_bwd(...): declared from the seam's list (kernels/ops_list.h)

// ---- LayerNorm (Whisper) ----
// out[N,C], mean[N], rstd[N]
// k_layernorm_fwd(...): declared from the seam's list (kernels/ops_list.h)
void k_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *mean,
                     const float *rstd, const float *w, int64_t N, int64_t C);

// ---- RoPE (rotate-half form, as Hugging Face Qwen2) ----
// tables cos[T, D/2], sin[T, D/2] for positions pos[T]: inv_freq[j] = 1 / theta^(2j/D) computed in float32,
// angle = (float)pos * inv_freq[j] in float32, cos/sin of it.
// k_rope_table(...): declared from the seam's list (kernels/ops_list.h)
// in place on x[B,T,H,D] (H heads of dim D): for j < D/2, (x1, x2) = (x[j], x[j+D/2])
//   x[j] = x1*cos - x2*sin ; x[j+D/2] = x2*cos + x1*sin
// k_rope_fwd(...): declared from the seam's list (kernels/ops_list.h)
// in place on dx[B,T,H,D]: applies the transpose (inverse) rotation (this is an overwrite, not an accumulate)
// k_rope_bwd(...): declared from the seam's list (kernels/ops_list.h)

// ---- attention (scaled dot product, grouped KV heads) ----
// q[B,T,H,D], k[B,T,KH,D], v[B,T,KH,D] (H % KH == 0; query head h uses kv head h / (H/KH)),
// keymask[B,T] (1 = real token, 0 = padding; NULL = all real), seg[B,T] segment ids (key s allowed for query t
// only if seg[b,s] == seg[b,t]: packed samples; NULL = one segment per row), causal: key s allowed for query t
// only if s <= t.
// out[B,T,H,D]; att: the stats, k_attention_stats_floats(B,T,H) = B*H*T*T floats [B,H,T,T], the softmax
// probabilities (saved for backward; masked entries are 0; a query row with no allowed key gets all-zero
// probabilities and a zero output). scale = 1/sqrt(D).
// k_attention_stats_floats(...): declared from the seam's list (kernels/ops_list.h)
// k_attention_fwd(...): declared from the seam's list (kernels/ops_list.h)
// k_attention_fwd_prec(int bf16, ...): declared from the seam's list (KB)
// Inference with a KV cache: queries q[B,T,H,D] at positions p0..p0+T-1 over keys/values kc, vc [B,S,KH,D]
// (S >= p0+T: the cache's capacity, positions-major) holding positions 0..p0+T-1; query t sees keys 0..p0+t
// (causal, no padding). out[B,T,H,D]. No probabilities are kept (forward only). scale = 1/sqrt(D).
// k_attention_cached_fwd(...): declared from the seam's list (kernels/ops_list.h)
// k_attention_cached_fwd_prec(int bf16, ...): declared from the seam's list (KB)
// dq[B,T,H,D], dk[B,T,KH,D], dv[B,T,KH,D] accumulate (acc 1; acc 0: zeroed first), from the forward's att and the
// same seg (out, keymask and causal are taken for the seam's sake: the probabilities carry their masks). Scratch:
// K_ATTN_BQ * T floats per thread in use.
enum { K_ATTN_BQ = 128 };
// elementwise kernels run on one thread below this many elements (an OpenMP fork/join costs more than the work)
enum { K_PAR_MIN = 1 << 15 };   // query rows per block (keys a block cannot see are skipped; see attention.c)
// k_attention_bwd(...): declared from the seam's list (kernels/ops_list.h)
// k_attention_bwd_prec(int bf16, ...): declared from the seam's list (KB)

// ---- activations ----
// SwiGLU: out[N] = silu(gate[N]) * up[N], silu(x) = x / (1 + exp(-x))
// k_swiglu_fwd(...): declared from the seam's list (kernels/ops_list.h)
// k_swiglu_bwd(...): declared from the seam's list (kernels/ops_list.h)
// GELU, exact erf form: 0.5 x (1 + erf(x / sqrt 2)); in place allowed (out == inp)
// k_gelu_fwd(...): declared from the seam's list (kernels/ops_list.h)
void k_gelu_bwd(float *dinp, const float *dout, const float *inp, int64_t N);
// ReLU; in place allowed
// k_relu_fwd(...): declared from the seam's list (kernels/ops_list.h)
void k_relu_bwd(float *dinp, const float *dout, const float *inp, int64_t N);
// dy[N] through a ReLU, in place, from the ReLU's output y[N]: dy[i] = 0 where !(y[i] > 0) (relu(h) > 0 exactly
// where h > 0), else unchanged
// k_relu_grad(...): declared from the seam's list (kernels/ops_list.h)
// inverted dropout of probability p (< 1) with the mask of stream key: keep_i = os_rng_uniform(key, i) >= p;
// acc 0: out[i] = keep_i ? inp[i] / (1 - p) : 0; acc 1: out[i] += inp[i] / (1 - p) where keep_i (else unchanged).
// inp, out [N] (dropout.c)
// k_dropout(...): declared from the seam's list (kernels/ops_list.h)

// ---- conv1d (Whisper front, forward only; cross-correlation like PyTorch) ----
// inp[Cin, Tin], w[Cout, Cin, K], b[Cout] -> out[Cout, Tout], Tout = (Tin + 2*pad - K) / stride + 1,
// out[o,t] = b[o] + sum_{i,k} w[o,i,k] * inp[i, stride*t + k - pad] (zero outside)
// k_conv1d_fwd(...): declared from the seam's list (kernels/ops_list.h)
// k_conv1d_fwd_prec(int bf16, ...): declared from the seam's list (KB)

// ---- softmax cross-entropy on a chunk of rows, fused forward + backward ----
// logits[N, V] with row stride ld (>= V) is OVERWRITTEN by dscale * dloss/dlogits (softmax - onehot) for rows
// whose label is not -100 and by 0 for ignored rows. labels[N] in [0, V) or -100 (checked by the caller).
// Returns the sum over non-ignored rows of -log softmax[label] (double); *ncorrect (may be NULL) += rows whose
// argmax (first maximum) equals the label.
double k_xent_fwd_bwd(float *logits, int64_t ld, const int32_t *labels, int64_t N, int64_t V, float dscale,
                      int64_t *ncorrect);
// rows per chunk of N rows over a vocabulary of V columns (about 128 MB of logits; at least 64, at most N): the
// head's chunk, and the activation plan's size of it; forced > 0: forced rows instead (at most N; the model's
// logits_rows, from the test hook OMNISHARD_LOGITS_ROWS: several chunks with a small vocabulary), 0: from V
int64_t k_xent_chunk_rows(int64_t V, int64_t N, int64_t forced);

// ---- AdamW with PyTorch's semantics (torch.optim.AdamW, foreach=False), on a flat range of n elements ----
// g is multiplied by gscale first (gradient clipping) and zeroed as it is read. step is the 1-based step count.
//   p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// k_adamw(...): declared from the seam's list (kernels/ops_list.h)

// ---- elementwise helpers ----
// nb batches of inp[R, C] transposed: out[b][c, r] = inp[b][r, c] (out [nb, C, R]; not in place; reshape.c)
// k_transpose(...): declared from the seam's list (kernels/ops_list.h)
// k_add: out = a + b (out may alias)
// k_axpy: y += a*x
// k_scale: x *= a
double k_sumsq(const float *x, int64_t N);                            // sum x^2 in double
int64_t k_first_nonfinite(const float *x, int64_t N);                // index of the first NaN/Inf in x[N], -1 if none
