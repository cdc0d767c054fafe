// The device seam's members, listed once (docs/design.md "The device seam"): each member of os_ops is one line
//   X(name, RET, GUARD, CPU, (A, type, arg), ...)
// and everything that has to name every member is generated from this list: the os_ops struct (kernels/ops.h), the
// CPU kernels' declarations (kernels/kernels.h) and the CPU table (ops_cpu.c), the guard backend's queued members
// (ops_guard_queue.c), the counting wrapper (ops_count.c), the CUDA kernels' declarations (cuda/cu_ops.h) and the
// CUDA table (cuda/ops_cuda.c), and op_compare's coverage check (tests/device/op_compare.c).
// RET: VOID, I64 (int64_t) or PTR (void *): what the member returns.
// GUARD: how the guard backend runs it -
//   MEM   the backend's memory (alloc, free, upload, download): each backend writes its own
//   ASK   answers the host from its arguments, reads no buffer: run at once (the CPU's member)
//   RUN   a kernel: recorded, run in order at the synchronisation points with its buffers opened
//   OWN   as RUN, running ops_guard_queue.c's own_<name> (a member whose run the guard adds to)
// CPU: K: the CPU backend runs k_<name>, declared by kernels.h from this line; KB: as K, and the member multiplies
// matrices, so its precision matters: kernels.h also declares k_<name>_prec(int bf16, <the same arguments>) and the
// CPU backend opened in bf16 (os_ops_cpu_open(1)) runs k_<name>_prec(1, ...) (a KB member without it does not link;
// a member with a product written K would run fp32 in bf16 mode: mark it KB); OWN: ops_cpu.c's cpu_<name>.
// The CUDA backend runs cu_<name> for every member but MEM (cu_ops.h declares them from this line; matmul and cast
// in cu_gemm.c, the others in src/cuda/*.cu).
// An argument is (P, type, name): a pointer, the backend's memory or NULL (the guard opens it for the call; strict:
// host memory stops the run), (H, type, name): a pointer to host memory (upload's source, download's destination,
// a name), (V, type, name): a value, (B, int64_t, name): a value that is a byte count (the counting wrapper adds
// it up), (T, os_tensor, name): a tensor view (core/tensor.h) passed by value, its data the backend's memory as
// P's, or (N, void, ): no arguments.
// Shapes, NULL rules and accumulate rules are written at each line; the conventions are kernels.h's (every *_bwd
// accumulates into its gradients, or where it has an acc argument, when acc is 1; B batch, T time, C channels, H heads, KH key/value heads, D head dim, V vocab,
// N rows). Reductions (xent_fwd_bwd, sumsq, first_nonfinite) write scalars on the backend's memory, never return
// them: the host reads them with download.
// Adding an op: one line here, its CPU kernel k_<name> (src/kernels/<op>.c; KB: k_<name>_prec too), its CUDA kernel
// cu_<name> (src/cuda/cu_<op>.cu), and its check in op_compare (the build's coverage test names a member without
// one): docs/design.md "Adding an op".
#pragma once
#include "core/tensor.h"
#include <stdint.h>

#define OS_OPS_LIST(X)                                                                                                \
    /* ---- the backend's memory ---- */                                                                              \
    /* bytes allocated zeroed (what: named in the out-of-memory message) */                                          \
    X(alloc, PTR, MEM, OWN, (B, int64_t, bytes), (H, const char *, what))                                              \
    /* the same, contents unspecified (the caller writes every byte before reading one: a gathered bucket, a     */  \
    /* reduce-scatter's slice), and zeroed bytes of which the caller writes only a small part (the CPU backend   */  \
    /* maps new pages that take no memory until written: os_alloc_lazy). free takes all three (NULL is fine)     */  \
    X(alloc_uninit, PTR, MEM, OWN, (B, int64_t, bytes), (H, const char *, what))                                       \
    X(alloc_sparse, PTR, MEM, OWN, (B, int64_t, bytes), (H, const char *, what))                                       \
    X(free, VOID, MEM, OWN, (P, void *, p))                                                                           \
    /* bytes copied host -> backend (upload) and backend -> host (download). download returns when the bytes are */  \
    /* on the host: it waits for every call issued before it (the synchronisation point)                         */  \
    X(upload, VOID, MEM, OWN, (P, void *, dst), (H, const void *, src), (B, int64_t, bytes))                          \
    X(download, VOID, MEM, OWN, (H, void *, dst), (P, const void *, src), (B, int64_t, bytes))                        \
    /* ---- buffers: n floats zeroed / copied ---- */                                                                 \
    X(zero, VOID, RUN, OWN, (P, float *, x), (V, int64_t, n))                                                         \
    X(copy, VOID, RUN, OWN, (P, float *, dst), (P, const float *, src), (V, int64_t, n))                              \
    /* ---- the matrix product and conversions on typed views ----                                               */  \
    /* a matrix product on typed views (core/tensor.h), k_matmul's definition (kernels.h): c = alpha * a @ b +    */  \
    /* beta * c, operands fp32 or bf16, fp32 accumulation, c fp32 or bf16; bias (fp32 [N], rows start from it)    */  \
    /* and dbias (fp32 [M] += row sums of a: a linear layer's bias gradient) optional (os_tensor_none())          */  \
    X(matmul, VOID, RUN, KB, (T, os_tensor, c), (T, os_tensor, a), (T, os_tensor, b), (V, float, alpha),             \
      (V, float, beta), (T, os_tensor, bias), (T, os_tensor, dbias))                                                  \
    /* dst = src element by element, converted: views of one shape (a vector, or a row-major matrix: stride[1] 1), */ \
    /* each fp32 or bf16 (fp32 -> bf16 rounds to nearest even, k_bf16_round; bf16 -> fp32 is exact; one dtype    */  \
    /* copies): a tensor stored as bf16 (the runtime's rounded weights, the head's stashed gradients)              */  \
    X(cast, VOID, RUN, K, (T, os_tensor, dst), (T, os_tensor, src))                                                  \
    /* ---- rows moved by an index list idx[n] (int32, the backend's; each < the source's rows, checked by the     */  \
    /* caller) ---- gather: out[i, :] = src[idx[i], :] for i < n, rows of C floats (a row with idx[i] < 0 is left   */  \
    /* as it is: a scatter of rows is a gather through the inverse list); scatter-add: dst[idx[i], :] += src[i, :]  */  \
    /* for i = 0, 1, .., n-1 in that order (rows repeated in idx add in it, so every backend gives the same bits;  */  \
    /* idx[i] < 0: skipped)                                                                                        */  \
    X(gather_rows, VOID, RUN, K, (P, float *, out), (P, const float *, src), (P, const int32_t *, idx),              \
      (V, int64_t, n), (V, int64_t, C))                                                                               \
    X(scatter_add_rows, VOID, RUN, K, (P, float *, dst), (P, const float *, src), (P, const int32_t *, idx),         \
      (V, int64_t, n), (V, int64_t, C))                                                                               \
    /* ---- a row broadcast over the rows of x[n, C] ---- add_row_bias: x[i, :] += b[:] for every row i (a bias   */  \
    /* after a product); sum_rows: out[:] += x[i, :] for i = 0, 1, .., n-1 in that order (a bias gradient; every  */  \
    /* backend adds in that order, so the bits are the same)                                                      */  \
    X(add_row_bias, VOID, RUN, K, (P, float *, x), (P, const float *, b), (V, int64_t, n), (V, int64_t, C))          \
    X(sum_rows, VOID, RUN, K, (P, float *, out), (P, const float *, x), (V, int64_t, n), (V, int64_t, C))            \
    /* ---- attention (scaled dot product, scale 1/sqrt(D), grouped KV heads: query head h uses kv head           */  \
    /* h / (H/KH)) ----                                                                                           */  \
    /* q/out [B,T,H,D], k/v [B,T,KH,D]; keymask [B,T] (1 = key may be seen; NULL = all); seg [B,T] (a query at t  */  \
    /* sees key s only if seg[b,s] == seg[b,t]: packed samples; NULL = one segment per row); causal: s <= t only. */  \
    /* stats: what attention_fwd keeps for attention_bwd, attention_stats_floats(B,T,H) floats (CPU: the          */  \
    /* probabilities [B,H,T,T], masked entries 0, a query row with no allowed key all 0 and a zero output; a      */  \
    /* fused GPU kernel: its log-sum-exp [B,H,T]). bwd: dq[B,T,H,D], dk, dv [B,T,KH,D] accumulate (acc 1) or are   */  \
    /* overwritten (acc 0: the bits of zeroing them and accumulating; nothing is read from them), from the        */  \
    /* forward's out, stats, keymask, seg and causal                                                              */  \
    X(attention_stats_floats, I64, ASK, K, (V, int64_t, B), (V, int64_t, T), (V, int64_t, H))                         \
    X(attention_fwd, VOID, RUN, KB, (P, float *, out), (P, float *, stats), (P, const float *, q),                   \
      (P, const float *, k), (P, const float *, v), (P, const uint8_t *, keymask), (P, const int32_t *, seg),       \
      (V, int, causal), (V, int64_t, B), (V, int64_t, T), (V, int64_t, H), (V, int64_t, KH), (V, int64_t, D))         \
    X(attention_bwd, VOID, RUN, KB, (P, float *, dq), (P, float *, dk), (P, float *, dv), (P, const float *, dout),   \
      (P, const float *, q), (P, const float *, k), (P, const float *, v), (P, const float *, out),                 \
      (P, const float *, stats), (P, const uint8_t *, keymask), (P, const int32_t *, seg), (V, int, causal),        \
      (V, int64_t, B), (V, int64_t, T), (V, int64_t, H), (V, int64_t, KH), (V, int64_t, D), (V, int, acc))             \
    /* inference with a KV cache: queries q[B,T,H,D] at positions p0..p0+T-1 over keys/values kc, vc [B,S,KH,D]   */  \
    /* (S >= p0+T: the cache's capacity, positions-major) holding positions 0..p0+T-1; query t sees keys 0..p0+t  */  \
    /* (causal, no padding). out[B,T,H,D]; nothing kept for a backward                                            */  \
    X(attention_cached_fwd, VOID, RUN, KB, (P, float *, out), (P, const float *, q), (P, const float *, kc),          \
      (P, const float *, vc), (V, int64_t, B), (V, int64_t, T), (V, int64_t, p0), (V, int64_t, S), (V, int64_t, H),  \
      (V, int64_t, KH), (V, int64_t, D))                                                                              \
    /* ---- norms ----                                                                                            */  \
    /* RMSNorm (Qwen2: y = x * rsqrt(mean(x^2) + eps) * w): out[N,C], rstd[N] saved for the backward. fwd with a  */  \
    /* residual res[N,C] (NULL: none): x = x + res first (written back: the residual sum), then its norm          */  \
    X(rmsnorm_fwd, VOID, RUN, K, (P, float *, out), (P, float *, rstd), (P, float *, x), (P, const float *, res),    \
      (P, const float *, w), (V, int64_t, N), (V, int64_t, C), (V, float, eps))                                       \
    X(rmsnorm_bwd, VOID, RUN, K, (P, float *, dinp), (P, float *, dw), (P, const float *, dout),                     \
      (P, const float *, inp), (P, const float *, w), (P, const float *, rstd), (V, int64_t, N), (V, int64_t, C))    \
    /* LayerNorm (Whisper): out[N,C], mean[N], rstd[N]                                                            */  \
    X(layernorm_fwd, VOID, RUN, K, (P, float *, out), (P, float *, mean), (P, float *, rstd), (P, const float *, inp), \
      (P, const float *, w), (P, const float *, b), (V, int64_t, N), (V, int64_t, C), (V, float, eps))               \
    /* ---- RoPE (rotate-half form, as Hugging Face Qwen2) ----                                                   */  \
    /* tables cos[T, D/2], sin[T, D/2] for positions pos[T]: inv_freq[j] = 1 / theta^(2j/D) in float32,           */  \
    /* angle = (float)pos * inv_freq[j] in float32, cos/sin of it                                                 */  \
    X(rope_table, VOID, RUN, K, (P, float *, cos_t), (P, float *, sin_t), (P, const int32_t *, pos), (V, int64_t, T), \
      (V, int64_t, D), (V, float, theta))                                                                             \
    /* in place on q[B,T,H,D] and k[B,T,KH,D] (one call for both; k NULL: q alone, KH unused): for each row x   */  \
    /* and j < D/2, (x1, x2) = (x[j], x[j+D/2]); x[j] = x1*cos - x2*sin, x[j+D/2] = x2*cos + x1*sin. bwd: in     */  \
    /* place on dq, dk, the inverse rotation (an overwrite)                                                       */  \
    X(rope_fwd, VOID, RUN, K, (P, float *, q), (P, float *, k), (P, const float *, cos_t), (P, const float *, sin_t), \
      (V, int64_t, B), (V, int64_t, T), (V, int64_t, H), (V, int64_t, KH), (V, int64_t, D))                           \
    X(rope_bwd, VOID, RUN, K, (P, float *, dq), (P, float *, dk), (P, const float *, cos_t),                         \
      (P, const float *, sin_t), (V, int64_t, B), (V, int64_t, T), (V, int64_t, H), (V, int64_t, KH), (V, int64_t, D)) \
    /* ---- embedding (ids checked by the caller) ----                                                            */  \
    /* fwd: out[b*L + l, :] = the sum over r = 0, 1, .., R-1 (in that order, from 0) of                           */  \
    /* scale * table[ids[(b*R + r)*L + l], :]: ids [B, R, L], out [B*L, C] (SLAM-Omni's mean of its R = G+1 rows, */  \
    /* scale 1/R; a plain lookup: R = 1). bwd: for each k < n, dtable[ids[k], :] += scale * dout[rows[j], :] for  */  \
    /* j = start[k], .., start[k+1]-1 in that order: ids [n] distinct table rows, start [n+1], rows [start[n]]    */  \
    /* the rows of dout [*, C] that read each (core/ids.h os_ids_group groups a lookup's ids); dtable NULL: none */  \
    X(embedding_fwd, VOID, RUN, K, (P, float *, out), (P, const int32_t *, ids), (P, const float *, table),           \
      (V, int64_t, B), (V, int64_t, R), (V, int64_t, L), (V, int64_t, C), (V, float, scale))                          \
    X(embedding_bwd, VOID, RUN, K, (P, float *, dtable), (P, const int32_t *, ids), (P, const int32_t *, start),      \
      (P, const int32_t *, rows), (P, const float *, dout), (V, int64_t, n), (V, int64_t, C), (V, float, scale))      \
    /* ---- activations, dropout, transpose, convolution ----                                                     */  \
    /* SwiGLU: out[N] = silu(gate[N]) * up[N], silu(x) = x / (1 + exp(-x)); bwd: dgate, dup accumulate (acc 1) or */  \
    /* are overwritten (acc 0: the bits of zeroing and accumulating; nothing is read from them)                   */  \
    X(swiglu_fwd, VOID, RUN, K, (P, float *, out), (P, const float *, gate), (P, const float *, up), (V, int64_t, N)) \
    X(swiglu_bwd, VOID, RUN, K, (P, float *, dgate), (P, float *, dup), (P, const float *, dout),                    \
      (P, const float *, gate), (P, const float *, up), (V, int64_t, N), (V, int, acc))                              \
    /* GELU, exact erf form: 0.5 x (1 + erf(x / sqrt 2)); ReLU. In place allowed (out == inp)                     */  \
    X(gelu_fwd, VOID, RUN, K, (P, float *, out), (P, const float *, inp), (V, int64_t, N))                            \
    X(relu_fwd, VOID, RUN, K, (P, float *, out), (P, const float *, inp), (V, int64_t, N))                            \
    /* dy[N] through a ReLU, in place, from its output y[N]: dy[i] = 0 where !(y[i] > 0), else unchanged (the     */  \
    /* projector's backward)                                                                                      */  \
    X(relu_grad, VOID, RUN, K, (P, float *, dy), (P, const float *, y), (V, int64_t, N))                              \
    /* inverted dropout of probability p (< 1) with the mask of stream key: keep_i = os_rng_uniform(key, i) >= p; */  \
    /* acc 0: out[i] = keep_i ? inp[i] / (1 - p) : 0; acc 1: out[i] += inp[i] / (1 - p) where keep_i. inp, out    */  \
    /* [N] (LoRA's input dropout forward, and its backward through the same mask)                                 */  \
    X(dropout, VOID, RUN, K, (P, float *, out), (P, const float *, inp), (V, int64_t, N), (V, float, p),              \
      (V, uint64_t, key), (V, int, acc))                                                                              \
    /* nb batches of inp[R, C] transposed: out[b][c, r] = inp[b][r, c] (out [nb, C, R]; not in place): the        */  \
    /* Whisper front's [d, T] -> [T, d], the projector's convolution windows [k, d] -> [d, k]                     */  \
    X(transpose, VOID, RUN, K, (P, float *, out), (P, const float *, inp), (V, int64_t, nb), (V, int64_t, R),         \
      (V, int64_t, C))                                                                                                \
    /* conv1d (Whisper front, forward only; cross-correlation like PyTorch): inp[Cin, Tin], w[Cout, Cin, K],      */  \
    /* b[Cout] -> out[Cout, Tout], Tout = (Tin + 2*pad - K) / stride + 1,                                         */  \
    /* out[o,t] = b[o] + sum_{i,k} w[o,i,k] * inp[i, stride*t + k - pad] (zero outside)                           */  \
    X(conv1d_fwd, VOID, RUN, KB, (P, float *, out), (P, const float *, inp), (P, const float *, w),                  \
      (P, const float *, b), (V, int64_t, Cin), (V, int64_t, Tin), (V, int64_t, Cout), (V, int64_t, K),             \
      (V, int64_t, stride), (V, int64_t, pad))                                                                        \
    /* ---- softmax cross-entropy on a chunk of rows, fused forward + backward (kernels.h k_xent_fwd_bwd):        */  \
    /* logits[N, V] (row stride ld) overwritten by dscale * dloss/dlogits; *sum += the rows' summed loss,         */  \
    /* *ncorrect += their correct argmax (both scalars on the backend's memory; ncorrect may be NULL) ----        */  \
    X(xent_fwd_bwd, VOID, RUN, OWN, (P, float *, logits), (V, int64_t, ld), (P, const int32_t *, labels),            \
      (V, int64_t, N), (V, int64_t, V), (V, float, dscale), (P, double *, sum), (P, int64_t *, ncorrect))            \
    /* ---- elementwise ----                                                                                      */  \
    /* out = a + b (out may alias); y += a*x; x *= a                                                              */  \
    X(add, VOID, RUN, K, (P, float *, out), (P, const float *, a), (P, const float *, b), (V, int64_t, N))            \
    X(axpy, VOID, RUN, K, (P, float *, y), (V, float, a), (P, const float *, x), (V, int64_t, N))                     \
    X(scale, VOID, RUN, K, (P, float *, x), (V, float, a), (V, int64_t, N))                                           \
    /* *out = sum x^2 in double; *out = the index of the first NaN or infinity in x[N], -1 when none (scalars on  */  \
    /* the backend's memory)                                                                                      */  \
    X(sumsq, VOID, RUN, OWN, (P, const float *, x), (V, int64_t, N), (P, double *, out))                              \
    X(first_nonfinite, VOID, RUN, OWN, (P, const float *, x), (V, int64_t, N), (P, int64_t *, out))                   \
    /* ---- AdamW with PyTorch's semantics (torch.optim.AdamW, foreach=False), on a flat range of n elements:     */  \
    /* g is multiplied by gscale first (gradient clipping) and zeroed as it is read; step is 1-based.             */  \
    /* p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= (lr / (1 - b1^t)) * m /                     */  \
    /* (sqrt(v) / sqrt(1 - b2^t) + eps) ----                                                                      */  \
    X(adamw, VOID, RUN, K, (P, float *, p), (P, float *, g), (P, float *, m), (P, float *, v), (V, int64_t, n),      \
      (V, float, lr), (V, float, b1), (V, float, b2), (V, float, eps), (V, float, wd), (V, float, gscale),           \
      (V, int64_t, step))

// ---- the generators' tools ----
// OS_MAP(f, sep, x1, ..., xn): f x1 sep() f x2 sep() ... f xn (n <= 20, each x a parenthesised argument)
#define OS_CAT(a, b) OS_CAT_(a, b)
#define OS_CAT_(a, b) a##b
#define OS_COUNT(...) OS_COUNT_(__VA_ARGS__, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define OS_COUNT_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, n, ...) n
#define OS_MAP(f, s, ...) OS_CAT(OS_MAP_, OS_COUNT(__VA_ARGS__))(f, s, __VA_ARGS__)
#define OS_MAP_1(f, s, x) f x
#define OS_MAP_2(f, s, x, ...) f x s() OS_MAP_1(f, s, __VA_ARGS__)
#define OS_MAP_3(f, s, x, ...) f x s() OS_MAP_2(f, s, __VA_ARGS__)
#define OS_MAP_4(f, s, x, ...) f x s() OS_MAP_3(f, s, __VA_ARGS__)
#define OS_MAP_5(f, s, x, ...) f x s() OS_MAP_4(f, s, __VA_ARGS__)
#define OS_MAP_6(f, s, x, ...) f x s() OS_MAP_5(f, s, __VA_ARGS__)
#define OS_MAP_7(f, s, x, ...) f x s() OS_MAP_6(f, s, __VA_ARGS__)
#define OS_MAP_8(f, s, x, ...) f x s() OS_MAP_7(f, s, __VA_ARGS__)
#define OS_MAP_9(f, s, x, ...) f x s() OS_MAP_8(f, s, __VA_ARGS__)
#define OS_MAP_10(f, s, x, ...) f x s() OS_MAP_9(f, s, __VA_ARGS__)
#define OS_MAP_11(f, s, x, ...) f x s() OS_MAP_10(f, s, __VA_ARGS__)
#define OS_MAP_12(f, s, x, ...) f x s() OS_MAP_11(f, s, __VA_ARGS__)
#define OS_MAP_13(f, s, x, ...) f x s() OS_MAP_12(f, s, __VA_ARGS__)
#define OS_MAP_14(f, s, x, ...) f x s() OS_MAP_13(f, s, __VA_ARGS__)
#define OS_MAP_15(f, s, x, ...) f x s() OS_MAP_14(f, s, __VA_ARGS__)
#define OS_MAP_16(f, s, x, ...) f x s() OS_MAP_15(f, s, __VA_ARGS__)
#define OS_MAP_17(f, s, x, ...) f x s() OS_MAP_16(f, s, __VA_ARGS__)
#define OS_MAP_18(f, s, x, ...) f x s() OS_MAP_17(f, s, __VA_ARGS__)
#define OS_MAP_19(f, s, x, ...) f x s() OS_MAP_18(f, s, __VA_ARGS__)
#define OS_MAP_20(f, s, x, ...) f x s() OS_MAP_19(f, s, __VA_ARGS__)
#define OS_COMMA() ,
#define OS_NONE()

// the return types; OS_RETURN(R, call): the call, its value returned when there is one
#define OS_T_VOID void
#define OS_T_I64 int64_t
#define OS_T_PTR void *
#define OS_T(R) OS_CAT(OS_T_, R)
#define OS_RETURN(R, call) OS_CAT(OS_RETURN_, R)(call)
#define OS_RETURN_VOID(call) call;
#define OS_RETURN_I64(call) return call;
#define OS_RETURN_PTR(call) return call;

// an argument (k, type, name) as a parameter ("type name"; (N, void, ): "void") and as an argument ("name")
#define OS_PARAM(k, t, n) t n
#define OS_ARG(k, t, n) n
#define OS_PARAMS(...) OS_MAP(OS_PARAM, OS_COMMA, __VA_ARGS__)
// the arguments passed on: a member without any (N) passes nothing
#define OS_ARGS(...) OS_MAP(OS_ARG, OS_COMMA, __VA_ARGS__)

// the members' count
#define OS_ONE(...) +1
enum { OS_OPS_MEMBERS = 0 OS_OPS_LIST(OS_ONE) };
