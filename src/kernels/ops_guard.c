// The guard backend of the device seam (kernels/ops.h; OMNISHARD_BACKEND=guard, a test hook): the CPU backend's
// kernels, but its memory (the table's alloc) is mapped PROT_NONE except while one of its own calls is given it.
// Every member of the table is wrapped: each pointer argument that lies in a guard buffer opens that buffer (read
// and write) for the call and closes it after; the buffers not passed stay closed. A host read or write of a
// backend buffer outside the seam then stops the program with SIGSEGV, as a device's memory would be out of the
// host's reach: the missing upload/download is found without a device. A product (gemm, linear, gemm_rounded) also
// opens the bf16 copy bound to an operand it is given (gemm_bind), which it reads in the operand's place.
// Strict (os_guard_set_strict, OMNISHARD_GUARD_STRICT=1): a compute member given host memory for any pointer
// argument (NULL aside), upload a host destination or download a host source, stops naming the member and the
// argument, as a device kernel could not read it (docs/design.md "The guard backend").
#include "kernels/ops.h"
#include "core/err.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    char *p;
    size_t len;
    int open;   // calls in flight that were given it (it is readable while > 0)
} region;

static region *g_r;   // sorted by address
static int g_n, g_cap;
typedef struct {
    const char *w;   // gemm_bind's operand range [w, w + n floats) and its bound copy
    int64_t n;
    const void *rounded;
} binding;
static binding *g_b;
static int g_nb, g_capb;
static int g_strict;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

void os_guard_set_strict(int on) { g_strict = on; }

static void grow(void **arr, int *cap, int n, size_t esz, const char *what) {
    if (n < *cap) return;
    int c = 2 * *cap + 16;
    void *more = realloc(*arr, esz * (size_t)c);
    if (!more) os_die("guard backend: out of memory for its table of %d %s", c, what);
    *arr = more, *cap = c;
}

// the region holding q (its end counts: an empty range at a buffer's end), or -1
static int find(const void *q) {
    int lo = 0, hi = g_n - 1, at = -1;
    while (lo <= hi) {   // the last region starting at or below q
        int mid = (lo + hi) / 2;
        if (g_r[mid].p <= (const char *)q) at = mid, lo = mid + 1;
        else hi = mid - 1;
    }
    return at >= 0 && (const char *)q <= g_r[at].p + g_r[at].len ? at : -1;
}

static void protect(region *r, int prot) {
    if (mprotect(r->p, r->len, prot)) os_die("guard backend: mprotect of %zu bytes failed", r->len);
}

static void *alloc(int64_t bytes, const char *what) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = ((size_t)(bytes > 0 ? bytes : 1) + page - 1) / page * page;
    char *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);   // zero pages
    if (p == MAP_FAILED) os_die("guard backend: out of memory: %zu bytes for %s", len, what);
    pthread_mutex_lock(&g_mu);
    grow((void **)&g_r, &g_cap, g_n, sizeof(region), "buffers");
    int i = g_n;
    while (i > 0 && g_r[i - 1].p > p) g_r[i] = g_r[i - 1], i--;
    g_r[i] = (region){p, len, 0}, g_n++;
    pthread_mutex_unlock(&g_mu);
    return p;
}

static void release(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_mu);
    int i = find(p);
    if (i < 0 || g_r[i].p != p) os_die("guard backend: free of %p, which it did not allocate", p);
    if (g_r[i].open) os_die("guard backend: free of %p while a call is given it", p);
    munmap(p, g_r[i].len);
    memmove(&g_r[i], &g_r[i + 1], sizeof(region) * (size_t)(g_n - i - 1)), g_n--;
    pthread_mutex_unlock(&g_mu);
}

// ---- one call: its arguments' regions opened, then closed ----
enum { MAXOPEN = 32 };
typedef struct {
    char *base[MAXOPEN];
    int n;
} opened;

static void open_region(opened *o, int i) {
    if (g_r[i].open++ == 0) protect(&g_r[i], PROT_READ | PROT_WRITE);
    OS_ASSERT(o->n < MAXOPEN);
    o->base[o->n++] = g_r[i].p;
}

// the k-th name of "a, b, c" (for the message)
static void arg_name(const char *names, int k, char *out, size_t n) {
    while (k-- > 0 && names) names = strchr(names, ','), names = names ? names + 1 : NULL;
    if (!names) names = "?";
    names += strspn(names, " ");
    size_t len = strcspn(names, ",");
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), names);
}

enum { ALL = (1 << 30) - 1 };   // device: every pointer argument must be backend memory (strict)
enum { PRODUCT = 1 << 30 | ALL };   // and a product, which reads the copies bound to its operands too

// opens the regions of p[0..n) (names: the arguments' names, "a, b, c"); in strict mode an argument of the mask
// device that is host memory stops the program
static opened enter(const char *member, const char *names, const void *const *p, int n, int device) {
    opened o = {.n = 0};
    pthread_mutex_lock(&g_mu);
    for (int k = 0; k < n; k++) {
        if (!p[k]) continue;
        int i = find(p[k]);
        if (i >= 0) open_region(&o, i);
        else if (g_strict && (device >> k & 1)) {
            char a[64];
            arg_name(names, k, a, sizeof a);
            os_die("guard backend (strict): %s: argument %s (%p) is host memory, not the backend's", member, a, p[k]);
        }
        for (int b = 0; (device & PRODUCT & ~ALL) && b < g_nb; b++)
            if ((const char *)p[k] >= g_b[b].w && (const char *)p[k] < g_b[b].w + 4 * g_b[b].n) {
                int j = find(g_b[b].rounded);
                if (j >= 0) open_region(&o, j);
            }
    }
    pthread_mutex_unlock(&g_mu);
    return o;
}

static void leave(const opened *o) {
    pthread_mutex_lock(&g_mu);
    for (int k = 0; k < o->n; k++) {
        int i = find(o->base[k]);
        OS_ASSERT(i >= 0 && g_r[i].open > 0);
        if (--g_r[i].open == 0) protect(&g_r[i], PROT_NONE);
    }
    pthread_mutex_unlock(&g_mu);
}

// run CALL with the pointer arguments ... open (DEVICE: the mask of those that must be backend memory, strict)
#define GUARDED(MEMBER, DEVICE, CALL, ...)                                                                           \
    do {                                                                                                              \
        const void *p_[] = {__VA_ARGS__};                                                                             \
        opened o_ = enter(#MEMBER, #__VA_ARGS__, p_, (int)(sizeof p_ / sizeof p_[0]), DEVICE);                        \
        CALL;                                                                                                         \
        leave(&o_);                                                                                                   \
    } while (0)
#define CPU os_ops_cpu

// ---- the members (signatures: ops.h) ----
static void upload(void *dst, const void *src, int64_t bytes) { GUARDED(upload, 1, CPU.upload(dst, src, bytes), dst, src); }
static void download(void *dst, const void *src, int64_t bytes) {
    GUARDED(download, 2, CPU.download(dst, src, bytes), dst, src);
}
static void zero(float *x, int64_t n) { GUARDED(zero, ALL, CPU.zero(x, n), x); }
static void copy(float *dst, const float *src, int64_t n) { GUARDED(copy, ALL, CPU.copy(dst, src, n), dst, src); }
static void gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    GUARDED(gemm, PRODUCT, CPU.gemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc), a, b, c);
}
static void gemm_pin(const float *w, int64_t rows, int64_t cols, int64_t ld) {
    GUARDED(gemm_pin, ALL, CPU.gemm_pin(w, rows, cols, ld), w);
}
static void to_bf16(uint16_t *dst, const float *src, int64_t n) { GUARDED(to_bf16, ALL, CPU.to_bf16(dst, src, n), dst, src); }
static void gemm_widen(void *buf, int64_t n) { GUARDED(gemm_widen, ALL, CPU.gemm_widen(buf, n), buf); }
static void gemm_bind(const float *w, int64_t n, const void *rounded) {
    GUARDED(gemm_bind, ALL, CPU.gemm_bind(w, n, rounded), w, rounded);   // (it keeps the pointers only)
    pthread_mutex_lock(&g_mu);
    int b = 0;
    while (b < g_nb && g_b[b].w != (const char *)w) b++;
    if (b == g_nb) grow((void **)&g_b, &g_capb, g_nb, sizeof(binding), "bindings"), g_nb++;
    g_b[b] = (binding){(const char *)w, n, rounded};
    pthread_mutex_unlock(&g_mu);
}
static void gemm_unbind(const float *w) {
    GUARDED(gemm_unbind, ALL, CPU.gemm_unbind(w), w);
    pthread_mutex_lock(&g_mu);
    for (int b = 0; b < g_nb; b++)
        if (g_b[b].w == (const char *)w) g_b[b] = g_b[--g_nb];
    pthread_mutex_unlock(&g_mu);
}
static void gemm_round(void *dst, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    GUARDED(gemm_round, ALL, CPU.gemm_round(dst, src, rows, cols, ld), dst, src);
}
static void gemm_rounded(int pre, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *a,
                         int64_t lda, const void *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    GUARDED(gemm_rounded, PRODUCT, CPU.gemm_rounded(pre, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc), a, b, c);
}
static void linear_fwd(float *out, const float *inp, const float *w, const float *bias, int64_t N, int64_t I, int64_t O) {
    GUARDED(linear_fwd, PRODUCT, CPU.linear_fwd(out, inp, w, bias, N, I, O), out, inp, w, bias);
}
static void linear_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                       int64_t N, int64_t I, int64_t O) {
    GUARDED(linear_bwd, PRODUCT, CPU.linear_bwd(dinp, dw, dbias, dout, inp, w, N, I, O), dinp, dw, dbias, dout, inp, w);
}
static void attention_fwd(float *out, float *stats, const float *q, const float *k, const float *v,
                          const uint8_t *keymask, const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H,
                          int64_t KH, int64_t D) {
    GUARDED(attention_fwd, ALL, CPU.attention_fwd(out, stats, q, k, v, keymask, seg, causal, B, T, H, KH, D), out,
            stats, q, k, v, keymask, seg);
}
static void attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                          const float *v, const float *out, const float *stats, const uint8_t *keymask,
                          const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D) {
    GUARDED(attention_bwd, ALL,
            CPU.attention_bwd(dq, dk, dv, dout, q, k, v, out, stats, keymask, seg, causal, B, T, H, KH, D), dq, dk, dv,
            dout, q, k, v, out, stats, keymask, seg);
}
static void attention_cached_fwd(float *out, const float *q, const float *kc, const float *vc, int64_t B, int64_t T,
                                 int64_t p0, int64_t S, int64_t H, int64_t KH, int64_t D) {
    GUARDED(attention_cached_fwd, ALL, CPU.attention_cached_fwd(out, q, kc, vc, B, T, p0, S, H, KH, D), out, q, kc, vc);
}
static void rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w, int64_t N, int64_t C, float eps) {
    GUARDED(rmsnorm_fwd, ALL, CPU.rmsnorm_fwd(out, rstd, inp, w, N, C, eps), out, rstd, inp, w);
}
static void rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd,
                        int64_t N, int64_t C) {
    GUARDED(rmsnorm_bwd, ALL, CPU.rmsnorm_bwd(dinp, dw, dout, inp, w, rstd, N, C), dinp, dw, dout, inp, w, rstd);
}
static void layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                          int64_t N, int64_t C, float eps) {
    GUARDED(layernorm_fwd, ALL, CPU.layernorm_fwd(out, mean, rstd, inp, w, b, N, C, eps), out, mean, rstd, inp, w, b);
}
static void rope_table(float *cos_t, float *sin_t, const int32_t *pos, int64_t T, int64_t D, float theta) {
    GUARDED(rope_table, ALL, CPU.rope_table(cos_t, sin_t, pos, T, D, theta), cos_t, sin_t, pos);
}
static void rope_fwd(float *x, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H, int64_t D) {
    GUARDED(rope_fwd, ALL, CPU.rope_fwd(x, cos_t, sin_t, B, T, H, D), x, cos_t, sin_t);
}
static void rope_bwd(float *dx, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H, int64_t D) {
    GUARDED(rope_bwd, ALL, CPU.rope_bwd(dx, cos_t, sin_t, B, T, H, D), dx, cos_t, sin_t);
}
static void embedding_fwd(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale) {
    GUARDED(embedding_fwd, ALL, CPU.embedding_fwd(out, ids, table, N, C, scale), out, ids, table);
}
static void embedding_acc(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale) {
    GUARDED(embedding_acc, ALL, CPU.embedding_acc(out, ids, table, N, C, scale), out, ids, table);
}
static void embedding_bwd(float *dtable, const int32_t *ids, const float *dout, int64_t N, int64_t C, float scale) {
    GUARDED(embedding_bwd, ALL, CPU.embedding_bwd(dtable, ids, dout, N, C, scale), dtable, ids, dout);
}
static void swiglu_fwd(float *out, const float *gate, const float *up, int64_t N) {
    GUARDED(swiglu_fwd, ALL, CPU.swiglu_fwd(out, gate, up, N), out, gate, up);
}
static void swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t N) {
    GUARDED(swiglu_bwd, ALL, CPU.swiglu_bwd(dgate, dup, dout, gate, up, N), dgate, dup, dout, gate, up);
}
static void gelu_fwd(float *out, const float *inp, int64_t N) { GUARDED(gelu_fwd, ALL, CPU.gelu_fwd(out, inp, N), out, inp); }
static void relu_fwd(float *out, const float *inp, int64_t N) { GUARDED(relu_fwd, ALL, CPU.relu_fwd(out, inp, N), out, inp); }
static void relu_grad(float *dy, const float *y, int64_t N) { GUARDED(relu_grad, ALL, CPU.relu_grad(dy, y, N), dy, y); }
static void dropout(float *out, const float *inp, int64_t N, float p, uint64_t key, int acc) {
    GUARDED(dropout, ALL, CPU.dropout(out, inp, N, p, key, acc), out, inp);
}
static void transpose(float *out, const float *inp, int64_t nb, int64_t R, int64_t C) {
    GUARDED(transpose, ALL, CPU.transpose(out, inp, nb, R, C), out, inp);
}
static void conv1d_fwd(float *out, const float *inp, const float *w, const float *b, int64_t Cin, int64_t Tin,
                       int64_t Cout, int64_t K, int64_t stride, int64_t pad) {
    GUARDED(conv1d_fwd, ALL, CPU.conv1d_fwd(out, inp, w, b, Cin, Tin, Cout, K, stride, pad), out, inp, w, b);
}
static void xent_fwd_bwd(float *logits, int64_t ld, const int32_t *labels, int64_t N, int64_t V, float dscale,
                         double *sum, int64_t *ncorrect) {
    GUARDED(xent_fwd_bwd, ALL, CPU.xent_fwd_bwd(logits, ld, labels, N, V, dscale, sum, ncorrect), logits, labels, sum,
            ncorrect);
}
static void add(float *out, const float *a, const float *b, int64_t N) { GUARDED(add, ALL, CPU.add(out, a, b, N), out, a, b); }
static void axpy(float *y, float a, const float *x, int64_t N) { GUARDED(axpy, ALL, CPU.axpy(y, a, x, N), y, x); }
static void scale(float *x, float a, int64_t N) { GUARDED(scale, ALL, CPU.scale(x, a, N), x); }
static void sumsq(const float *x, int64_t N, double *out) { GUARDED(sumsq, ALL, CPU.sumsq(x, N, out), x, out); }
static void adamw(float *p, float *g, float *m, float *v, int64_t n, float lr, float b1, float b2, float eps, float wd,
                  float gscale, int64_t step) {
    GUARDED(adamw, ALL, CPU.adamw(p, g, m, v, n, lr, b1, b2, eps, wd, gscale, step), p, g, m, v);
}

static void first_nonfinite(const float *x, int64_t N, int64_t *out) {
    GUARDED(first_nonfinite, ALL, CPU.first_nonfinite(x, N, out), x, out);
}

static os_ops g_guard;
static void fill(void) {
    g_guard = os_ops_cpu;   // the members without pointers (gemm_unpin, gemm_bound_esz, gemm_rounds, attention_stats_floats) as they are
    g_guard.name = "guard";
    g_guard.alloc = alloc, g_guard.free = release, g_guard.upload = upload, g_guard.download = download;
    g_guard.zero = zero, g_guard.copy = copy, g_guard.gemm = gemm, g_guard.gemm_pin = gemm_pin;
    g_guard.to_bf16 = to_bf16, g_guard.gemm_widen = gemm_widen, g_guard.gemm_bind = gemm_bind;
    g_guard.gemm_unbind = gemm_unbind, g_guard.gemm_round = gemm_round, g_guard.gemm_rounded = gemm_rounded;
    g_guard.linear_fwd = linear_fwd, g_guard.linear_bwd = linear_bwd, g_guard.attention_fwd = attention_fwd;
    g_guard.attention_bwd = attention_bwd, g_guard.attention_cached_fwd = attention_cached_fwd;
    g_guard.rmsnorm_fwd = rmsnorm_fwd, g_guard.rmsnorm_bwd = rmsnorm_bwd, g_guard.layernorm_fwd = layernorm_fwd;
    g_guard.rope_table = rope_table, g_guard.rope_fwd = rope_fwd, g_guard.rope_bwd = rope_bwd;
    g_guard.embedding_fwd = embedding_fwd, g_guard.embedding_acc = embedding_acc, g_guard.embedding_bwd = embedding_bwd;
    g_guard.swiglu_fwd = swiglu_fwd, g_guard.swiglu_bwd = swiglu_bwd, g_guard.gelu_fwd = gelu_fwd;
    g_guard.relu_fwd = relu_fwd, g_guard.relu_grad = relu_grad, g_guard.dropout = dropout;
    g_guard.transpose = transpose, g_guard.conv1d_fwd = conv1d_fwd, g_guard.xent_fwd_bwd = xent_fwd_bwd;
    g_guard.add = add, g_guard.axpy = axpy, g_guard.scale = scale, g_guard.sumsq = sumsq, g_guard.adamw = adamw;
    g_guard.first_nonfinite = first_nonfinite;
    g_guard.alloc_uninit = alloc, g_guard.alloc_sparse = alloc, g_guard.host_memory = 0;   // MPI stages (zero/comm.c)
}

const os_ops *os_ops_guard(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill);
    return &g_guard;
}
