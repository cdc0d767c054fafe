// The device seam: every operation the model (src/model/), the parameter loss terms and the optimizer step run on
// their buffers, as one table. A backend fills the table; the callers go through os_k, so a new device (CUDA,
// Ascend) is a new ops_<device>.c and its kernels, not edits across the tree. docs/design.md "Device seam" says
// which buffers live where and who synchronises.
// Each compute member has the signature, shapes and accumulate rules of the k_ kernel of the same name in
// kernels.h (the CPU backend's implementation). The buffer members stand for memset/memcpy on the backend's memory.
// Reductions (xent_fwd_bwd, sumsq) write their results into scalars on the backend's memory, never return them:
// the host reads them with download, at one point per micro-batch (train/step.c) and one for the gradient norm
// (zero/runtime.c), so nothing inside the forward and backward waits for the device.
#pragma once
#include "core/tensor.h"
#include <stdint.h>

enum { OS_PRE_A = 1, OS_PRE_B = 2 };   // gemm_rounded: which operands come rounded

typedef struct {
    const char *name;
    // the backend's memory: bytes allocated zeroed (what: named in the out-of-memory message) and freed (NULL is
    // fine); bytes copied host -> backend (upload) and backend -> host (download). download returns when the bytes
    // are on the host: it waits for every call issued before it (the synchronisation point)
    void *(*alloc)(int64_t bytes, const char *what);
    // the same, contents unspecified (the caller writes every byte before reading one: a gathered bucket, a
    // reduce-scatter's slice), and zeroed bytes of which the caller writes only a small part (the CPU backend maps
    // new pages that take no memory until written: os_alloc_lazy). free takes all three
    void *(*alloc_uninit)(int64_t bytes, const char *what);
    void *(*alloc_sparse)(int64_t bytes, const char *what);
    void (*free)(void *p);
    // 1: the backend's memory is the host's (the CPU backend): MPI may read and write it in place (zero/coll_inplace.c);
    // 0: it is reached only through this table (zero/coll_staged.c stages the collectives through host buffers)
    int host_memory;
    // the products' precision, set when the backend was opened (os_ops_cpu_open, os_ops_guard_open, os_cuda_open;
    // --torch_dtype): 0 fp32, 1 bf16 mixed precision (every product rounds its fp32 operands to bf16 and
    // accumulates in fp32: gemm, linear_*, matmul, the attention's and the convolution's products)
    int bf16;
    void (*upload)(void *dst, const void *src, int64_t bytes);
    void (*download)(void *dst, const void *src, int64_t bytes);
    // buffers: n floats zeroed / copied (dst and src on the backend's memory)
    void (*zero)(float *x, int64_t n);
    void (*copy)(float *dst, const float *src, int64_t n);
    // matrix products
    void (*gemm)(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
    // a weight every following gemm/linear reads as is, until gemm_unpin: a backend that converts it (bf16 mixed
    // precision rounds it) may do so once (k_gemm_bf16_pin)
    void (*gemm_pin)(const float *w, int64_t rows, int64_t cols, int64_t ld);
    void (*gemm_unpin)(void);
    // bf16 mixed precision, weights rounded ahead by their owner (the ZeRO runtime; k_gemm_bf16_bind and its
    // neighbours in kernels.h): bf16 bits of src; the bytes of one element of a bound copy; bits widened in place
    // to that format; w[n]'s bound copy (every gemm/linear operand inside it reads the copy) until gemm_unbind(w)
    void (*to_bf16)(uint16_t *dst, const float *src, int64_t n);
    int64_t (*gemm_bound_esz)(void);
    void (*gemm_widen)(void *buf, int64_t n);
    void (*gemm_bind)(const float *w, int64_t n, const void *rounded);
    void (*gemm_unbind)(const float *w);
    // operands rounded by the caller (k_gemm_round, k_gemm_rounded): the bytes of a rounded element while products
    // round (bf16 1; 0: they do not), rounding rows into that format, a product reading such copies (pre:
    // OS_PRE_A and/or OS_PRE_B)
    int64_t (*gemm_rounds)(void);
    void (*gemm_round)(void *dst, const float *src, int64_t rows, int64_t cols, int64_t ld);
    void (*gemm_rounded)(int pre, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *a,
                         int64_t lda, const void *b, int64_t ldb, float beta, float *c, int64_t ldc);
    void (*linear_fwd)(float *out, const float *inp, const float *w, const float *bias, int64_t N, int64_t I, int64_t O);
    void (*linear_bwd)(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                       int64_t N, int64_t I, int64_t O);
    // a matrix product on typed views (core/tensor.h), k_matmul's definition (kernels.h): c = alpha * a @ b +
    // beta * c, operands fp32 or bf16, fp32 accumulation, c fp32 or bf16; bias (fp32 [N], rows start from it) and
    // dbias (fp32 [M] += row sums of a: a linear layer's bias gradient) optional (os_tensor_none())
    void (*matmul)(os_tensor c, os_tensor a, os_tensor b, float alpha, float beta, os_tensor bias, os_tensor dbias);
    // attention: q/out [B,T,H,D], k/v [B,T,KH,D]; keymask [B,T] (1 = key may be seen; NULL = all); seg [B,T]
    // (a query at t sees key s only if seg[b,s] == seg[b,t]; NULL = one segment per row). stats: the buffer
    // attention_fwd fills for attention_bwd, attention_stats_floats(B,T,H) floats (CPU: the probabilities B*H*T*T;
    // a fused GPU kernel: its log-sum-exp B*H*T); bwd takes the forward's out, stats, keymask, seg and causal
    int64_t (*attention_stats_floats)(int64_t B, int64_t T, int64_t H);
    void (*attention_fwd)(float *out, float *stats, const float *q, const float *k, const float *v,
                          const uint8_t *keymask, const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H,
                          int64_t KH, int64_t D);
    void (*attention_bwd)(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                          const float *v, const float *out, const float *stats, const uint8_t *keymask,
                          const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D);
    void (*attention_cached_fwd)(float *out, const float *q, const float *kc, const float *vc, int64_t B, int64_t T,
                                 int64_t p0, int64_t S, int64_t H, int64_t KH, int64_t D);
    // norms
    void (*rmsnorm_fwd)(float *out, float *rstd, const float *inp, const float *w, int64_t N, int64_t C, float eps);
    void (*rmsnorm_bwd)(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd,
                        int64_t N, int64_t C);
    void (*layernorm_fwd)(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                          int64_t N, int64_t C, float eps);
    // rope
    void (*rope_table)(float *cos_t, float *sin_t, const int32_t *pos, int64_t T, int64_t D, float theta);
    void (*rope_fwd)(float *x, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H, int64_t D);
    void (*rope_bwd)(float *dx, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H, int64_t D);
    // embedding
    void (*embedding_fwd)(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale);
    void (*embedding_acc)(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale);
    void (*embedding_bwd)(float *dtable, const int32_t *ids, const float *dout, int64_t N, int64_t C, float scale);
    // activations, convolution
    void (*swiglu_fwd)(float *out, const float *gate, const float *up, int64_t N);
    void (*swiglu_bwd)(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t N);
    void (*gelu_fwd)(float *out, const float *inp, int64_t N);
    void (*relu_fwd)(float *out, const float *inp, int64_t N);
    // dy[N] through a ReLU, in place, from its output y[N]: dy[i] = 0 where !(y[i] > 0) (the projector's backward)
    void (*relu_grad)(float *dy, const float *y, int64_t N);
    // inverted dropout, out/inp [N], probability p < 1, the mask a function of (key, i) (k_dropout: keep_i =
    // os_rng_uniform(key, i) >= p): acc 0 out = keep * inp / (1 - p); acc 1 out += that where kept (LoRA's input
    // dropout forward, and its backward through the same mask)
    void (*dropout)(float *out, const float *inp, int64_t N, float p, uint64_t key, int acc);
    // nb batches of inp[R, C] transposed into out[nb, C, R] (not in place): the Whisper front's [d, T] -> [T, d],
    // the projector's convolution windows [k, d] -> [d, k]
    void (*transpose)(float *out, const float *inp, int64_t nb, int64_t R, int64_t C);
    void (*conv1d_fwd)(float *out, const float *inp, const float *w, const float *b, int64_t Cin, int64_t Tin,
                       int64_t Cout, int64_t K, int64_t stride, int64_t pad);
    // softmax cross-entropy (fused forward + backward on a chunk of rows): *sum += the rows' summed loss,
    // *ncorrect += their correct argmax (both scalars on the backend's memory)
    void (*xent_fwd_bwd)(float *logits, int64_t ld, const int32_t *labels, int64_t N, int64_t V, float dscale,
                         double *sum, int64_t *ncorrect);
    // elementwise
    void (*add)(float *out, const float *a, const float *b, int64_t N);
    void (*axpy)(float *y, float a, const float *x, int64_t N);
    void (*scale)(float *x, float a, int64_t N);
    void (*sumsq)(const float *x, int64_t N, double *out);   // *out = sum x^2 (a scalar on the backend's memory)
    // *out = the index of the first NaN or infinity in x[N], -1 when none (a scalar on the backend's memory)
    void (*first_nonfinite)(const float *x, int64_t N, int64_t *out);
    // optimizer
    void (*adamw)(float *p, float *g, float *m, float *v, int64_t n, float lr, float b1, float b2, float eps, float wd,
                  float gscale, int64_t step);
} os_ops;

extern const os_ops os_ops_cpu;   // kernels/ops_cpu.c: OpenBLAS + OpenMP, fp32 products
// the CPU backend opened with its products' precision (bf16 1: the table whose product members round; call
// k_gemm_bf16_setup first, kernels.h)
const os_ops *os_ops_cpu_open(int bf16);
extern const os_ops *os_k;        // the backend in use (os_ops_cpu; cli/device.c opens another: --device,
                                  // with --torch_dtype's precision)
// kernels/ops_guard.c: the CPU kernels with the backend's memory out of the host's reach outside its calls, run
// in order only at download and free as on a device's stream (ops_guard_queue.c; a test hook)
// os_ops_guard: the table as last opened (fp32 until opened otherwise); os_ops_guard_open(bf16): opened over the CPU
// backend of that precision (one guard backend per process: opening it again sets its precision)
const os_ops *os_ops_guard(void);
const os_ops *os_ops_guard_open(int bf16);
// strict guard (the default; --device guard:lax turns it off): a member given host memory where a device needs
// its own memory (any pointer of a compute member, upload's destination, download's source) stops the program
// naming both
void os_guard_set_strict(int on);
