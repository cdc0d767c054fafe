// The guard backend's stream (docs/design.md "The guard backend"): a GPU runs kernels after the host issued them,
// so the guard runs none when it is called. Every compute member (and zero, copy, the bf16 pin and bindings)
// records its call — values by value, pointers as pointers, host pointers too — and the recorded calls run in the
// order made only at the synchronisation points: download (it returns when the bytes are on the host) and free
// (the CUDA backend's free is stream-ordered: work issued before it still runs on the buffer, so the queue runs
// first). upload copies the host's bytes when called (a copy from pageable memory is done with the host buffer
// when it returns) and writes them in queue order. So a result read by the host without a download, or a host
// array a kernel was given and the host changed before the next synchronisation, gives other numbers than the CPU
// backend's (tests/test_guard_backend.py compares them bit for bit). Members that answer the host (gemm_rounds,
// gemm_bound_esz, attention_stats_floats) run at once: they read no buffer.
#include "kernels/ops_guard_mem.h"
#include "kernels/ops_guard_queue.h"
#include "core/err.h"
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

// ---- the queue: records laid end to end in one growing buffer ----
typedef struct {
    void (*run)(const void *args);
    size_t size;   // of the record, header included (a multiple of ALIGN)
} record;
#define ALIGN alignof(max_align_t)
#define ROUND(n) (((n) + ALIGN - 1) / ALIGN * ALIGN)

static char *g_q;
static size_t g_len, g_cap;
static pthread_mutex_t g_qmu = PTHREAD_MUTEX_INITIALIZER;

void gd_enqueue(void (*run)(const void *), const void *args, size_t bytes, const void *extra, size_t nextra) {
    size_t head = ROUND(sizeof(record)), size = head + ROUND(bytes) + ROUND(nextra);
    pthread_mutex_lock(&g_qmu);
    if (g_len + size > g_cap) {
        size_t cap = 2 * (g_len + size) + 4096;
        char *more = realloc(g_q, cap);
        if (!more) os_die("guard backend: out of memory for its queue of %zu bytes", cap);
        g_q = more, g_cap = cap;
    }
    char *r = g_q + g_len;
    *(record *)r = (record){run, size};
    memcpy(r + head, args, bytes);
    if (nextra) memcpy(r + head + ROUND(bytes), extra, nextra);
    g_len += size;
    pthread_mutex_unlock(&g_qmu);
}

const void *gd_extra(const void *args, size_t bytes) { return (const char *)args + ROUND(bytes); }

void gd_flush(void) {
    pthread_mutex_lock(&g_qmu);
    for (size_t at = 0; at < g_len; at += ((record *)(g_q + at))->size)
        ((record *)(g_q + at))->run(g_q + at + ROUND(sizeof(record)));
    g_len = 0;
    pthread_mutex_unlock(&g_qmu);
}

// ---- the members, generated from one list ----
// GD_MAP(f, sep, x1, ..., xn): f x1 sep() f x2 sep() ... f xn (n <= 17, each x a parenthesised argument)
#define GD_CAT(a, b) GD_CAT_(a, b)
#define GD_CAT_(a, b) a##b
#define GD_COUNT(...) GD_COUNT_(__VA_ARGS__, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define GD_COUNT_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, n, ...) n
#define GD_MAP(f, s, ...) GD_CAT(GD_MAP_, GD_COUNT(__VA_ARGS__))(f, s, __VA_ARGS__)
#define GD_MAP_1(f, s, x) f x
#define GD_MAP_2(f, s, x, ...) f x s() GD_MAP_1(f, s, __VA_ARGS__)
#define GD_MAP_3(f, s, x, ...) f x s() GD_MAP_2(f, s, __VA_ARGS__)
#define GD_MAP_4(f, s, x, ...) f x s() GD_MAP_3(f, s, __VA_ARGS__)
#define GD_MAP_5(f, s, x, ...) f x s() GD_MAP_4(f, s, __VA_ARGS__)
#define GD_MAP_6(f, s, x, ...) f x s() GD_MAP_5(f, s, __VA_ARGS__)
#define GD_MAP_7(f, s, x, ...) f x s() GD_MAP_6(f, s, __VA_ARGS__)
#define GD_MAP_8(f, s, x, ...) f x s() GD_MAP_7(f, s, __VA_ARGS__)
#define GD_MAP_9(f, s, x, ...) f x s() GD_MAP_8(f, s, __VA_ARGS__)
#define GD_MAP_10(f, s, x, ...) f x s() GD_MAP_9(f, s, __VA_ARGS__)
#define GD_MAP_11(f, s, x, ...) f x s() GD_MAP_10(f, s, __VA_ARGS__)
#define GD_MAP_12(f, s, x, ...) f x s() GD_MAP_11(f, s, __VA_ARGS__)
#define GD_MAP_13(f, s, x, ...) f x s() GD_MAP_12(f, s, __VA_ARGS__)
#define GD_MAP_14(f, s, x, ...) f x s() GD_MAP_13(f, s, __VA_ARGS__)
#define GD_MAP_15(f, s, x, ...) f x s() GD_MAP_14(f, s, __VA_ARGS__)
#define GD_MAP_16(f, s, x, ...) f x s() GD_MAP_15(f, s, __VA_ARGS__)
#define GD_MAP_17(f, s, x, ...) f x s() GD_MAP_16(f, s, __VA_ARGS__)
#define GD_COMMA() ,
#define GD_NONE()

// an argument is (P, type, name): a pointer (opened for the call; strict: the backend's memory or NULL),
// (V, type, name): a value (int, int64_t, float, uint64_t) or (T, os_tensor, name): a tensor view (core/tensor.h),
// recorded by value, its data a pointer as P's
#define GD_PARAM(k, t, n) t n                          // the member's parameter
#define GD_FIELD(k, t, n) t n;                         // its field in the record
#define GD_NAME(k, t, n) n                             // the parameter, recorded
#define GD_ARG(k, t, n) q_->n                          // the recorded value, passed on
#define GD_PTR(k, t, n) GD_CAT(GD_PTR_, k)(n)          // the pointers, into p_[]
#define GD_PTR_P(n) p_[n_++] = q_->n;
#define GD_PTR_V(n)
#define GD_PTR_T(n) p_[n_++] = q_->n.data;
#define GD_PNAME(k, t, n) GD_CAT(GD_PNAME_, k)(n)      // their names, "a, b, c"
#define GD_PNAME_P(n) #n ", "
#define GD_PNAME_V(n)
#define GD_PNAME_T(n) #n ", "

// a queued member: NAME's record (NAME_q), the pointers in it (NAME_ptrs), its run when the queue reaches it
// (IMPL on the recorded arguments, their buffers open; PRODUCT: the bf16 copies bound to them too), and the member
// itself (strict check, record)
#define GD_QUEUED(NAME, PRODUCT, IMPL, ...)                                                                          \
    typedef struct {                                                                                                  \
        GD_MAP(GD_FIELD, GD_NONE, __VA_ARGS__)                                                                        \
    } NAME##_q;                                                                                                       \
    static int NAME##_ptrs(const NAME##_q *q_, const void **p_) {                                                     \
        int n_ = 0;                                                                                                   \
        GD_MAP(GD_PTR, GD_NONE, __VA_ARGS__)                                                                          \
        return n_;                                                                                                    \
    }                                                                                                                 \
    static void NAME##_run(const void *v_) {                                                                          \
        const NAME##_q *q_ = v_;                                                                                      \
        const void *p_[GD_MAXPTR];                                                                                    \
        gd_opened o_ = gd_enter(p_, NAME##_ptrs(q_, p_), PRODUCT);                                                    \
        IMPL(GD_MAP(GD_ARG, GD_COMMA, __VA_ARGS__));                                                                  \
        gd_leave(&o_);                                                                                                \
    }                                                                                                                 \
    static void NAME(GD_MAP(GD_PARAM, GD_COMMA, __VA_ARGS__)) {                                                       \
        NAME##_q r_ = {GD_MAP(GD_NAME, GD_COMMA, __VA_ARGS__)};                                                       \
        const void *p_[GD_MAXPTR];                                                                                    \
        gd_strict(#NAME, GD_MAP(GD_PNAME, GD_NONE, __VA_ARGS__), p_, NAME##_ptrs(&r_, p_));                           \
        gd_enqueue(NAME##_run, &r_, sizeof r_, NULL, 0);                                                              \
    }
static const os_ops *g_cpu = &os_ops_cpu;   // the CPU backend the recorded calls run on (gd_set_cpu)
void gd_set_cpu(const os_ops *cpu) { g_cpu = cpu; }

#define KERNEL(NAME, ...) GD_QUEUED(NAME, 0, g_cpu->NAME, __VA_ARGS__)
#define PRODUCT(NAME, ...) GD_QUEUED(NAME, 1, g_cpu->NAME, __VA_ARGS__)

// the signatures are ops.h's (a mismatch fails to compile where gd_fill_queued puts the member into the table)
KERNEL(zero, (P, float *, x), (V, int64_t, n))
KERNEL(copy, (P, float *, dst), (P, const float *, src), (V, int64_t, n))
PRODUCT(gemm, (V, int, ta), (V, int, tb), (V, int64_t, M), (V, int64_t, N), (V, int64_t, K), (V, float, alpha),
        (P, const float *, a), (V, int64_t, lda), (P, const float *, b), (V, int64_t, ldb), (V, float, beta),
        (P, float *, c), (V, int64_t, ldc))
KERNEL(gemm_pin, (P, const float *, w), (V, int64_t, rows), (V, int64_t, cols), (V, int64_t, ld))
KERNEL(to_bf16, (P, uint16_t *, dst), (P, const float *, src), (V, int64_t, n))
KERNEL(gemm_widen, (P, void *, buf), (V, int64_t, n))
KERNEL(gemm_round, (P, void *, dst), (P, const float *, src), (V, int64_t, rows), (V, int64_t, cols), (V, int64_t, ld))
PRODUCT(gemm_rounded, (V, int, pre), (V, int, ta), (V, int, tb), (V, int64_t, M), (V, int64_t, N), (V, int64_t, K),
        (V, float, alpha), (P, const void *, a), (V, int64_t, lda), (P, const void *, b), (V, int64_t, ldb),
        (V, float, beta), (P, float *, c), (V, int64_t, ldc))
PRODUCT(linear_fwd, (P, float *, out), (P, const float *, inp), (P, const float *, w), (P, const float *, bias),
        (V, int64_t, N), (V, int64_t, I), (V, int64_t, O))
PRODUCT(linear_bwd, (P, float *, dinp), (P, float *, dw), (P, float *, dbias), (P, const float *, dout),
        (P, const float *, inp), (P, const float *, w), (V, int64_t, N), (V, int64_t, I), (V, int64_t, O))
PRODUCT(matmul, (T, os_tensor, c), (T, os_tensor, a), (T, os_tensor, b), (V, float, alpha), (V, float, beta),
        (T, os_tensor, bias), (T, os_tensor, dbias))
KERNEL(attention_fwd, (P, float *, out), (P, float *, stats), (P, const float *, q), (P, const float *, k),
       (P, const float *, v), (P, const uint8_t *, keymask), (P, const int32_t *, seg), (V, int, causal),
       (V, int64_t, B), (V, int64_t, T), (V, int64_t, H), (V, int64_t, KH), (V, int64_t, D))
KERNEL(attention_bwd, (P, float *, dq), (P, float *, dk), (P, float *, dv), (P, const float *, dout),
       (P, const float *, q), (P, const float *, k), (P, const float *, v), (P, const float *, out),
       (P, const float *, stats), (P, const uint8_t *, keymask), (P, const int32_t *, seg), (V, int, causal),
       (V, int64_t, B), (V, int64_t, T), (V, int64_t, H), (V, int64_t, KH), (V, int64_t, D))
KERNEL(attention_cached_fwd, (P, float *, out), (P, const float *, q), (P, const float *, kc), (P, const float *, vc),
       (V, int64_t, B), (V, int64_t, T), (V, int64_t, p0), (V, int64_t, S), (V, int64_t, H), (V, int64_t, KH),
       (V, int64_t, D))
KERNEL(rmsnorm_fwd, (P, float *, out), (P, float *, rstd), (P, const float *, inp), (P, const float *, w),
       (V, int64_t, N), (V, int64_t, C), (V, float, eps))
KERNEL(rmsnorm_bwd, (P, float *, dinp), (P, float *, dw), (P, const float *, dout), (P, const float *, inp),
       (P, const float *, w), (P, const float *, rstd), (V, int64_t, N), (V, int64_t, C))
KERNEL(layernorm_fwd, (P, float *, out), (P, float *, mean), (P, float *, rstd), (P, const float *, inp),
       (P, const float *, w), (P, const float *, b), (V, int64_t, N), (V, int64_t, C), (V, float, eps))
KERNEL(rope_table, (P, float *, cos_t), (P, float *, sin_t), (P, const int32_t *, pos), (V, int64_t, T),
       (V, int64_t, D), (V, float, theta))
KERNEL(rope_fwd, (P, float *, x), (P, const float *, cos_t), (P, const float *, sin_t), (V, int64_t, B),
       (V, int64_t, T), (V, int64_t, H), (V, int64_t, D))
KERNEL(rope_bwd, (P, float *, dx), (P, const float *, cos_t), (P, const float *, sin_t), (V, int64_t, B),
       (V, int64_t, T), (V, int64_t, H), (V, int64_t, D))
KERNEL(embedding_fwd, (P, float *, out), (P, const int32_t *, ids), (P, const float *, table), (V, int64_t, N),
       (V, int64_t, C), (V, float, scale))
KERNEL(embedding_acc, (P, float *, out), (P, const int32_t *, ids), (P, const float *, table), (V, int64_t, N),
       (V, int64_t, C), (V, float, scale))
KERNEL(embedding_bwd, (P, float *, dtable), (P, const int32_t *, ids), (P, const float *, dout), (V, int64_t, N),
       (V, int64_t, C), (V, float, scale))
KERNEL(swiglu_fwd, (P, float *, out), (P, const float *, gate), (P, const float *, up), (V, int64_t, N))
KERNEL(swiglu_bwd, (P, float *, dgate), (P, float *, dup), (P, const float *, dout), (P, const float *, gate),
       (P, const float *, up), (V, int64_t, N))
KERNEL(gelu_fwd, (P, float *, out), (P, const float *, inp), (V, int64_t, N))
KERNEL(relu_fwd, (P, float *, out), (P, const float *, inp), (V, int64_t, N))
KERNEL(relu_grad, (P, float *, dy), (P, const float *, y), (V, int64_t, N))
KERNEL(dropout, (P, float *, out), (P, const float *, inp), (V, int64_t, N), (V, float, p), (V, uint64_t, key),
       (V, int, acc))
KERNEL(transpose, (P, float *, out), (P, const float *, inp), (V, int64_t, nb), (V, int64_t, R), (V, int64_t, C))
KERNEL(conv1d_fwd, (P, float *, out), (P, const float *, inp), (P, const float *, w), (P, const float *, b),
       (V, int64_t, Cin), (V, int64_t, Tin), (V, int64_t, Cout), (V, int64_t, K), (V, int64_t, stride),
       (V, int64_t, pad))
KERNEL(xent_fwd_bwd, (P, float *, logits), (V, int64_t, ld), (P, const int32_t *, labels), (V, int64_t, N),
       (V, int64_t, V), (V, float, dscale), (P, double *, sum), (P, int64_t *, ncorrect))
KERNEL(add, (P, float *, out), (P, const float *, a), (P, const float *, b), (V, int64_t, N))
KERNEL(axpy, (P, float *, y), (V, float, a), (P, const float *, x), (V, int64_t, N))
KERNEL(scale, (P, float *, x), (V, float, a), (V, int64_t, N))
KERNEL(sumsq, (P, const float *, x), (V, int64_t, N), (P, double *, out))
KERNEL(first_nonfinite, (P, const float *, x), (V, int64_t, N), (P, int64_t *, out))
KERNEL(adamw, (P, float *, p), (P, float *, g), (P, float *, m), (P, float *, v), (V, int64_t, n), (V, float, lr),
       (V, float, b1), (V, float, b2), (V, float, eps), (V, float, wd), (V, float, gscale), (V, int64_t, step))

// the bindings: the CPU's and the guard's own record, in queue order (a product recorded before gemm_bind reads
// the operand, one recorded after it the copy)
static void bind_now(const float *w, int64_t n, const void *rounded) {
    os_ops_cpu.gemm_bind(w, n, rounded);
    gd_bind(w, n, rounded);
}
static void unbind_now(const float *w) {
    os_ops_cpu.gemm_unbind(w);
    gd_unbind(w);
}
GD_QUEUED(gemm_bind, 0, bind_now, (P, const float *, w), (V, int64_t, n), (P, const void *, rounded))
GD_QUEUED(gemm_unbind, 0, unbind_now, (P, const float *, w))

static void unpin_run(const void *v) {
    (void)v;
    os_ops_cpu.gemm_unpin();
}
static void gemm_unpin(void) { gd_enqueue(unpin_run, "", 1, NULL, 0); }

void gd_fill_queued(os_ops *t) {
    t->zero = zero, t->copy = copy, t->gemm = gemm, t->gemm_pin = gemm_pin, t->gemm_unpin = gemm_unpin;
    t->to_bf16 = to_bf16, t->gemm_widen = gemm_widen, t->gemm_bind = gemm_bind, t->gemm_unbind = gemm_unbind;
    t->gemm_round = gemm_round, t->gemm_rounded = gemm_rounded, t->linear_fwd = linear_fwd;
    t->linear_bwd = linear_bwd, t->matmul = matmul, t->attention_fwd = attention_fwd, t->attention_bwd = attention_bwd;
    t->attention_cached_fwd = attention_cached_fwd, t->rmsnorm_fwd = rmsnorm_fwd, t->rmsnorm_bwd = rmsnorm_bwd;
    t->layernorm_fwd = layernorm_fwd, t->rope_table = rope_table, t->rope_fwd = rope_fwd, t->rope_bwd = rope_bwd;
    t->embedding_fwd = embedding_fwd, t->embedding_acc = embedding_acc, t->embedding_bwd = embedding_bwd;
    t->swiglu_fwd = swiglu_fwd, t->swiglu_bwd = swiglu_bwd, t->gelu_fwd = gelu_fwd, t->relu_fwd = relu_fwd;
    t->relu_grad = relu_grad, t->dropout = dropout, t->transpose = transpose, t->conv1d_fwd = conv1d_fwd;
    t->xent_fwd_bwd = xent_fwd_bwd, t->add = add, t->axpy = axpy, t->scale = scale, t->sumsq = sumsq;
    t->first_nonfinite = first_nonfinite, t->adamw = adamw;
}
