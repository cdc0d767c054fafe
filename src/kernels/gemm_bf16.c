// k_gemm in bf16 mixed precision (--torch_dtype bfloat16, docs/training.md "bf16 mixed precision"): op(a) and
// op(b) are rounded to bf16 (round to nearest even, as PyTorch's .to(torch.bfloat16)) and multiplied with fp32
// accumulation into the fp32 c. Two paths compute the same sums (a bf16 x bf16 product is exact in fp32; only the
// order of the fp32 additions differs):
//  - onednn: oneDNN on bf16 inputs, where the CPU has AVX512-BF16 or AMX-BF16, through one of two kernels:
//      gemm:   its bf16 GEMM (dnnl_gemm_bf16bf16f32: row-major, sgemm's arguments; exported by libdnnl but not
//              declared in its headers, so looked up at run time), on AVX512-BF16 CPUs without AMX, where it ran
//              1.05-1.14x the matmul's rate on a layer's products and 1.17-1.5x on the head's gradients
//              (docs/performance.md);
//      matmul: its matmul primitive (documented API), where oneDNN runs AMX (the primitive uses the tiles) or
//              where the gemm entry is missing or fails its probe;
//  - sgemm:  elsewhere (or OMNISHARD_BF16_GEMM=sgemm): the rounded values held as fp32, OpenBLAS sgemm.
// Both operands are rounded into per-thread scratch (grown to the largest product and kept; os_plan_bf16 in
// src/train/plan.c counts it), unless one comes rounded (k_gemm_rounded: a bf16 operand of k_matmul, such as the
// runtime's bf16 copy of a weight, docs/zero.md "bf16"); then the product is cut over the threads like the fp32
// one (k_gemm_run), each block one single-threaded oneDNN call.
#include "core/alloc.h"
#include "core/cpu.h"
#include "core/err.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include <dlfcn.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int onednn;   // the path: 1 onednn, 0 sgemm (set once by setup)
static char impl[160] = "?";   // the kernels, with the matmul's name (up to 63 characters)
static dnnl_engine_t eng;

const char *k_gemm_bf16_impl(void) { return onednn ? impl : "OpenBLAS sgemm on bf16-rounded fp32"; }

// ---- rounding ----
static inline uint32_t bf16_bits(float f) {   // the upper 16 bits of the rounded value; NaN stays NaN (quiet)
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : r;
}

void k_bf16_round(uint16_t *dst, const float *src, int64_t n) {
#pragma omp parallel for simd schedule(static) if (!omp_in_parallel() && n >= (1 << 16))
    for (int64_t i = 0; i < n; i++) dst[i] = (uint16_t)bf16_bits(src[i]);
}

// dst[rows, cols] (packed) = src[rows, cols] (row stride ld) rounded: bf16 bits (onednn) or fp32 (sgemm)
static void round_rows(void *dst, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    int par = !omp_in_parallel() && rows * cols >= (1 << 16);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t r = 0; r < rows; r++) {
        const float *s = src + r * ld;
        if (onednn) {
            uint16_t *d = (uint16_t *)dst + r * cols;
            for (int64_t j = 0; j < cols; j++) d[j] = (uint16_t)bf16_bits(s[j]);
        } else {
            uint32_t *d = (uint32_t *)dst + r * cols;
            for (int64_t j = 0; j < cols; j++) d[j] = bf16_bits(s[j]) << 16;
        }
    }
}

static _Thread_local void *scr[2];
static _Thread_local size_t scr_cap[2];

static void *scratch(int i, size_t bytes) { return k_scratch(&scr[i], &scr_cap[i], bytes, "bf16 GEMM input scratch"); }

// ---- oneDNN matmul, one primitive per shape, cached per thread ----
typedef struct {
    int64_t M, N, K, lda, ldb, ldc;
    int ta, tb;
    float alpha, beta;
    dnnl_primitive_t p;
    dnnl_memory_t mem[3];
} prim;
enum { CACHE = 128 };   // one step of issue 12's model uses 48 shapes per thread (the head stash added some)
static _Thread_local prim cache[CACHE];
static _Thread_local int ncache, evict;
static _Thread_local dnnl_stream_t strm;

static void ok(dnnl_status_t st, const char *what) {
    if (st != dnnl_success) os_die("oneDNN: %s failed (status %d) in a bf16 GEMM", what, (int)st);
}

const char *k_onednn_matmul(dnnl_engine_t eng, const k_gemm_op *g, dnnl_data_type_t in, dnnl_primitive_t *p,
                            dnnl_memory_desc_t md[3], char impl_name[64]) {
#define TRY(call, what) if ((call) != dnnl_success) return what
    dnnl_dims_t da = {g->M, g->K}, db = {g->K, g->N}, dc = {g->M, g->N};
    dnnl_dims_t sa = {g->ta ? 1 : g->lda, g->ta ? g->lda : 1}, sb = {g->tb ? 1 : g->ldb, g->tb ? g->ldb : 1};
    dnnl_dims_t sc = {g->ldc, 1};
    TRY(dnnl_memory_desc_init_by_strides(&md[0], 2, da, in, sa), "memory desc");
    TRY(dnnl_memory_desc_init_by_strides(&md[1], 2, db, in, sb), "memory desc");
    TRY(dnnl_memory_desc_init_by_strides(&md[2], 2, dc, dnnl_f32, sc), "memory desc");
    dnnl_matmul_desc_t d;
    TRY(dnnl_matmul_desc_init(&d, &md[0], &md[1], NULL, &md[2]), "matmul desc");
    dnnl_primitive_attr_t attr;
    TRY(dnnl_primitive_attr_create(&attr), "attr");
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    const char *what = NULL;
    if (g->alpha != 1.0f && dnnl_primitive_attr_set_output_scales(attr, 1, 0, &g->alpha) != dnnl_success)
        what = "output scale";
    if (!what && g->beta != 0.0f &&   // c = alpha * op(a) @ op(b) + beta * c
        (dnnl_post_ops_create(&po) != dnnl_success || dnnl_post_ops_append_sum(po, g->beta) != dnnl_success ||
         dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success))
        what = "sum post op";
    if (!what && dnnl_primitive_desc_create(&pd, &d, attr, eng, NULL) != dnnl_success) what = "matmul descriptor";
    if (!what && dnnl_primitive_create(p, pd) != dnnl_success) what = "matmul primitive";
    const char *name = NULL;
    if (!what && impl_name && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success && name)
        snprintf(impl_name, 64, "%s", name);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return what;
#undef TRY
}

static prim *get_prim(const k_gemm_op *g, char *impl_name) {
    for (int i = 0; i < ncache; i++) {
        prim *e = &cache[i];
        if (e->M == g->M && e->N == g->N && e->K == g->K && e->lda == g->lda && e->ldb == g->ldb && e->ldc == g->ldc &&
            e->ta == g->ta && e->tb == g->tb && e->alpha == g->alpha && e->beta == g->beta)
            return e;
    }
    if (!strm) ok(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags), "stream");
    prim *e = ncache < CACHE ? &cache[ncache++] : &cache[evict++ % CACHE];
    if (e->p) {
        dnnl_primitive_destroy(e->p);
        for (int i = 0; i < 3; i++) dnnl_memory_destroy(e->mem[i]);
    }
    *e = (prim){g->M, g->N, g->K, g->lda, g->ldb, g->ldc, g->ta, g->tb, g->alpha, g->beta, NULL, {NULL}};
    dnnl_memory_desc_t md[3];
    const char *what = k_onednn_matmul(eng, g, dnnl_bf16, &e->p, md, impl_name);
    if (what) os_die("oneDNN: %s failed in a bf16 GEMM", what);
    for (int i = 0; i < 3; i++) ok(dnnl_memory_create(&e->mem[i], &md[i], eng, DNNL_MEMORY_NONE), "memory");
    return e;
}

// oneDNN's bf16 GEMM: c[M,N] = alpha * op(a) @ op(b) + beta * c, row-major, a and b bf16 bits, c fp32
typedef dnnl_status_t gemm_fn(char ta, char tb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K, float alpha,
                              const uint16_t *a, dnnl_dim_t lda, const uint16_t *b, dnnl_dim_t ldb, float beta,
                              float *c, dnnl_dim_t ldc);
static gemm_fn *dgemm;   // NULL: the matmul primitive for every product
static int mm_ta;        // 1: the matmul primitive for the products whose a is transposed (AMX), dgemm for the rest

static void gemm_entry(const k_gemm_op *g) {
    ok(dgemm(g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->M, g->N, g->K, g->alpha, g->a, g->lda, g->b, g->ldb, g->beta,
             g->c, g->ldc), "gemm_bf16bf16f32");
}

static void onednn_run(const k_gemm_op *g) {
    if (dgemm && !(mm_ta && g->ta)) {
        // the GEMM entry sums a 1-row (1-column) product in another order than the same row among 2 or more rows
        // (its matrix-vector kernel): such a product runs with a zero row (column) beside it
        k_gemm_padded(g, 2, 2, gemm_entry);
        return;
    }
    prim *e = get_prim(g, NULL);
    ok(dnnl_memory_set_data_handle(e->mem[0], (void *)g->a), "data handle");
    ok(dnnl_memory_set_data_handle(e->mem[1], (void *)g->b), "data handle");
    ok(dnnl_memory_set_data_handle(e->mem[2], g->c), "data handle");
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->mem[0]}, {DNNL_ARG_WEIGHTS, e->mem[1]}, {DNNL_ARG_DST, e->mem[2]}};
    ok(dnnl_primitive_execute(e->p, strm, 3, args), "matmul");
    ok(dnnl_stream_wait(strm), "stream wait");
}

// One block on the calling thread only: oneDNN would otherwise start its own OpenMP team outside a parallel
// region (its primitives plan their threads when created, so both happen in here)
static void onednn_kernel(const k_gemm_op *g) {
    if (omp_in_parallel()) {
        onednn_run(g);
        return;
    }
#pragma omp parallel num_threads(1)
    {
        omp_set_num_threads(1);   // this region's own setting: oneDNN reads omp_get_max_threads()
        onednn_run(g);
    }
}

// One probe call c[M,N] = 2 op(a) @ op(b) + 0.5 c on c = 1, with padded strides, against the sum of small
// integers (exact in fp32 in any order, so every kernel gives these bits)
static int probe_ok(gemm_fn *f, int ta, int tb) {
    enum { M = 24, N = 40, K = 56, PAD = 3, LD = K + M + PAD };   // LD holds a row of any operand here
    static uint16_t a[(K + M) * LD], b[(K + N) * LD];
    static float c[M * (N + PAD)];
    float x[(K + M) * LD], y[(K + N) * LD];
    int64_t lda = (ta ? M : K) + PAD, ldb = (tb ? K : N) + PAD, ldc = N + PAD;
    for (int i = 0; i < (K + M) * LD; i++) x[i] = (float)(i % 7 - 3), a[i] = (uint16_t)bf16_bits(x[i]);
    for (int i = 0; i < (K + N) * LD; i++) y[i] = (float)(i % 5 - 2), b[i] = (uint16_t)bf16_bits(y[i]);
    for (int i = 0; i < M * (N + PAD); i++) c[i] = 1.0f;
    int good = 0;
#pragma omp parallel num_threads(1)
    {
        omp_set_num_threads(1);
        good = f(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 2.0f, a, lda, b, ldb, 0.5f, c, ldc) == dnnl_success;
    }
    for (int m = 0; m < M && good; m++)
        for (int n = 0; n < N + PAD; n++) {
            float s = 0.0f;
            for (int k = 0; k < K && n < N; k++)
                s += x[ta ? k * lda + m : m * lda + k] * y[tb ? n * ldb + k : k * ldb + n];
            good &= c[m * ldc + n] == (n < N ? 2.0f * s + 0.5f : 1.0f);   // the padding is left alone
        }
    return good;
}

// oneDNN's bf16 GEMM entry when it is there and computes the probe products exactly
static gemm_fn *find_gemm(void) {
    gemm_fn *f;
    *(void **)&f = dlsym(RTLD_DEFAULT, "dnnl_gemm_bf16bf16f32");
    return f && probe_ok(f, 0, 1) && probe_ok(f, 1, 0) ? f : NULL;
}

// OMNISHARD_BF16_GEMM names a oneDNN kernel (onednn: the CPU's; onednn_gemm, onednn_matmul)
static int names_onednn(const char *env) {
    return env && (!strcmp(env, "onednn") || !strcmp(env, "onednn_gemm") || !strcmp(env, "onednn_matmul"));
}

// oneDNN runs AMX here (the CPU has the tiles, the kernel lets it use them, DNNL_MAX_CPU_ISA does not forbid it)
static int onednn_amx(void) {
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx;
}

// The path and oneDNN's kernel, from the CPU's features (or OMNISHARD_BF16_GEMM; a forced kernel that cannot run
// leaves onednn 0 or dgemm NULL, and k_gemm_bf16_setup refuses it). The matmul must choose a bf16 kernel for a probe
// product (its name is logged); its reference code would be far slower than the fallback.
static const char *g_forced;   // k_gemm_bf16_setup's, for setup (pthread_once takes no argument)

static void setup(void) {
    const char *env = g_forced;
    int forced = env != NULL;
    onednn = forced ? names_onednn(env) : os_cpu_has_bf16();
    if (onednn && dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) onednn = 0;
    if (!onednn) return;
    const dnnl_version_t *v = dnnl_version();
    int only = forced && strcmp(env, "onednn");   // one kernel for every product: onednn_gemm or onednn_matmul
    if (!(only && !strcmp(env, "onednn_matmul"))) dgemm = find_gemm();
    if (dgemm && (only || !onednn_amx())) {
        snprintf(impl, sizeof impl, "oneDNN %d.%d.%d gemm_bf16bf16f32", v->major, v->minor, v->patch);
        return;
    }
    if (only && !strcmp(env, "onednn_gemm")) return;   // refused by k_gemm_bf16_setup
    char name[64] = "?";
    k_gemm_op probe = {0, 1, 32, 32, 32, 1.0f, 0.0f, NULL, NULL, 32, 32, 32, NULL, 2};
    const char *failed = NULL;
#pragma omp parallel num_threads(1)
    {
        omp_set_num_threads(1);
        dnnl_primitive_t p = NULL;
        dnnl_memory_desc_t md[3];
        failed = k_onednn_matmul(eng, &probe, dnnl_bf16, &p, md, name);
        if (p) dnnl_primitive_destroy(p);
    }
    if (dgemm) {   // AMX: the matmul takes the products whose a is transposed, if it runs here; the GEMM the rest
        mm_ta = !failed && !strstr(name, "ref");
        snprintf(impl, sizeof impl, "oneDNN %d.%d.%d gemm_bf16bf16f32%s%s", v->major, v->minor, v->patch,
                 mm_ta ? ", a transposed: matmul " : "", mm_ta ? name : "");
        return;
    }
    snprintf(impl, sizeof impl, "oneDNN %d.%d.%d matmul %s", v->major, v->minor, v->patch, name);
    if (failed || (strstr(name, "ref") && !forced)) onednn = 0;
}
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const char *g_force;   // k_gemm_bf16_force's
void k_gemm_bf16_force(const char *forced) { g_force = forced; }

int k_gemm_bf16_setup(const char *forced, const char **path) {
    const char *env = forced ? forced : g_force;
    if (env && !names_onednn(env) && strcmp(env, "sgemm"))
        return os_errf("OMNISHARD_BF16_GEMM: expected onednn, onednn_gemm, onednn_matmul or sgemm (or unset: chosen "
                       "from the CPU), got '%s'", env);
    g_forced = env;
    pthread_once(&once, setup);
    if (names_onednn(env) && !onednn)
        return os_errf("OMNISHARD_BF16_GEMM=%s: oneDNN has no bf16 matmul on this CPU (use sgemm)", env);
    if (env && !strcmp(env, "onednn_gemm") && !dgemm)
        return os_errf("OMNISHARD_BF16_GEMM=onednn_gemm: this libdnnl has no working dnnl_gemm_bf16bf16f32 (use "
                       "onednn_matmul)");
    if (path) *path = onednn ? "onednn" : "sgemm";
    return 0;
}

int64_t k_gemm_bf16_esz(void) {
    pthread_once(&once, setup);
    return onednn ? 2 : 4;
}

// the operand src [rows, cols] (row stride ld) rounded into scratch i (packed: *ldr = cols)
static const void *rounded(int i, const float *src, int64_t rows, int64_t cols, int64_t ld, int64_t *ldr) {
    *ldr = cols;
    void *d = scratch(i, (onednn ? 2 : 4) * (size_t)(rows * cols));
    round_rows(d, src, rows, cols, ld);
    return d;
}

// g's operands not flagged in pre (bit 0: a, bit 1: b; those are in the path's format already) rounded, then run
static void run_pre(const k_gemm_op *g, int pre) {
    pthread_once(&once, setup);
    int64_t ar = g->ta ? g->K : g->M, ac = g->ta ? g->M : g->K;   // a and b as stored
    int64_t br = g->tb ? g->N : g->K, bc = g->tb ? g->K : g->N;
    k_gemm_op r = *g;
    if (!(pre & 1)) r.a = rounded(0, g->a, ar, ac, g->lda, &r.lda);
    if (!(pre & 2)) r.b = rounded(1, g->b, br, bc, g->ldb, &r.ldb);
    r.esz = onednn ? 2 : 4;
    k_gemm_run(&r, onednn ? onednn_kernel : k_gemm_sgemm);
}

void k_gemm_bf16(const k_gemm_op *g) { run_pre(g, 0); }

void k_gemm_rounded(int pre, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *a, int64_t lda,
                    const void *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    OS_ASSERT(K > 0);
    k_gemm_blas_single_thread();
    k_gemm_op g = {ta, tb, M, N, K, alpha, beta, a, b, lda, ldb, ldc, c, 4};
    double t0 = k_gemm_times_start();
    run_pre(&g, pre);
    k_gemm_times_end(t0, &g, 1 + pre);
}
