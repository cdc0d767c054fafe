// cuBLASLt through dlopen (cu_lt.h). The library's own header gives every type and constant; each function is
// looked up by name into a pointer of the header's type (__typeof__), so a signature mismatch does not compile.
// Row-major to cuBLASLt's column-major: c[M,N] row-major is c^T [N,M] column-major = op(b)^T op(a)^T, so the call
// is the column-major product m = N, n = M with b as its first operand and a as its second, strides unchanged.
#include "cuda/cu_lt.h"
#include "cuda/cu_alloc.h"
#include "cuda/cu_runtime.h"
#include "core/err.h"
#include <cublasLt.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define FNS(X)                                                                                                        \
    X(cublasLtCreate) X(cublasLtGetStatusString) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)           \
    X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)                  \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)    \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)
#define PTR(f) static __typeof__(&f) p_##f;
FNS(PTR)
#undef PTR

enum { WORKSPACE = 32 << 20, CACHE = 1024 };   // bytes of cuBLASLt workspace; cached plans (a power of two)
static cublasLtHandle_t g_lt;
static void *g_ws;

int cu_lt_open(void) {
    if (g_lt) return 0;
    char name[64];   // the cuBLAS of the CUDA major version built against (CUDART_VERSION 13000: .so.13)
    snprintf(name, sizeof name, "libcublasLt.so.%d", CUDART_VERSION / 1000);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return os_errf("--device cuda: cuBLASLt not found: %s (install CUDA %d's cuBLAS, e.g. pip install "
                       "nvidia-cublas==%d.*, and put the folder holding %s on LD_LIBRARY_PATH)", dlerror(),
                       CUDART_VERSION / 1000, CUDART_VERSION / 1000, name);
#define LOOK(f)                                                                                                       \
    if (!(*(void **)&p_##f = dlsym(h, #f))) return os_errf("--device cuda: %s has no %s", name, #f);
    FNS(LOOK)
#undef LOOK
    cublasStatus_t st = p_cublasLtCreate(&g_lt);
    if (st != CUBLAS_STATUS_SUCCESS)
        return os_errf("--device cuda: cublasLtCreate: %s", p_cublasLtGetStatusString(st));
    g_ws = cu_alloc(WORKSPACE, "cuBLASLt workspace");
    return 0;
}

static void ok(cublasStatus_t st, const char *what, const cu_matmul_op *g) {
    if (st != CUBLAS_STATUS_SUCCESS)
        os_die("CUDA backend: cuBLASLt %s: %s (product %c%c M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld %s)", what,
               p_cublasLtGetStatusString(st), g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', (long long)g->M, (long long)g->N,
               (long long)g->K, (long long)g->lda, (long long)g->ldb, (long long)g->ldc, g->bf16 ? "bf16" : "fp32");
}

// the largest power of two dividing the address, at most 256 (the heuristic must know the operands' alignment)
static uint32_t align_of(const void *p) {
    uintptr_t u = (uintptr_t)p;
    uint32_t a = 256;
    while (a > 1 && u % a) a /= 2;
    return a;
}

typedef struct {
    int ta, tb, bf16, tf32, beta0, bias;
    int64_t M, N, K, lda, ldb, ldc;
    uint32_t al[4];
} plan_key;

typedef struct {
    plan_key k;
    int used, none;   // none: the heuristic found no algorithm (a bias epilogue it cannot fuse)
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;   // la: the column-major first operand (b), lb: the second (a), lc: c
    cublasLtMatmulAlgo_t algo;
} plan;
static plan g_plans[CACHE];

static uint64_t key_hash(const plan_key *k) {
    const unsigned char *b = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

// a row-major [rows, cols] operand with row stride ld, as cuBLASLt's column-major [cols, rows] with that stride
static cublasLtMatrixLayout_t layout(int bf16, int64_t rows, int64_t cols, int64_t ld, const cu_matmul_op *g) {
    cublasLtMatrixLayout_t l;
    if (rows == 1 && ld < cols) ld = cols;   // one row: its stride is never stepped
    ok(p_cublasLtMatrixLayoutCreate(&l, bf16 ? CUDA_R_16BF : CUDA_R_32F, (uint64_t)cols, (uint64_t)rows, ld),
       "matrix layout", g);
    return l;
}

static void build(plan *e, const cu_matmul_op *g) {
    e->none = 0;
    ok(p_cublasLtMatmulDescCreate(&e->desc, g->tf32 && !g->bf16 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                  CUDA_R_32F), "matmul descriptor", g);
    cublasOperation_t opa = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    ok(p_cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "transa", g);
    ok(p_cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "transb", g);
    if (g->bias) {   // the bias along cuBLASLt's rows of D (our columns, N): fp32 as D
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        ok(p_cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue", g);
    }
    // b as stored: [K, N] (tb 0) or [N, K]; a as stored: [M, K] (ta 0) or [K, M]; c: [M, N]
    e->la = layout(g->bf16, g->tb ? g->N : g->K, g->tb ? g->K : g->N, g->ldb, g);
    e->lb = layout(g->bf16, g->ta ? g->K : g->M, g->ta ? g->M : g->K, g->lda, g);
    e->lc = layout(0, g->M, g->N, g->ldc, g);
    cublasLtMatmulPreference_t pref;
    ok(p_cublasLtMatmulPreferenceCreate(&pref), "preference", g);
    uint64_t ws = WORKSPACE;
    ok(p_cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
       "workspace preference", g);
    const cublasLtMatmulPreferenceAttributes_t al[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t v[4] = {e->k.al[1], e->k.al[0], e->k.al[2], e->k.al[2]};   // cuBLASLt's A is our b
    for (int i = 0; i < 4; i++)
        ok(p_cublasLtMatmulPreferenceSetAttribute(pref, al[i], &v[i], sizeof v[i]), "alignment preference", g);
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    ok(p_cublasLtMatmulAlgoGetHeuristic(g_lt, e->desc, e->la, e->lb, e->lc, e->lc, pref, 1, &r, &found), "heuristic",
       g);
    p_cublasLtMatmulPreferenceDestroy(pref);
    if (found < 1 && g->bias) e->none = 1;   // the caller adds the bias itself
    else if (found < 1) ok(CUBLAS_STATUS_NOT_SUPPORTED, "heuristic found no algorithm", g);
    e->algo = r.algo;
}

static void drop(plan *e) {
    p_cublasLtMatrixLayoutDestroy(e->la), p_cublasLtMatrixLayoutDestroy(e->lb), p_cublasLtMatrixLayoutDestroy(e->lc);
    p_cublasLtMatmulDescDestroy(e->desc);
    e->used = 0;
}

static plan *get_plan(const cu_matmul_op *g) {
    plan_key k;
    memset(&k, 0, sizeof k);   // the hash reads the padding too
    k.ta = g->ta, k.tb = g->tb, k.bf16 = g->bf16, k.tf32 = g->tf32 && !g->bf16, k.beta0 = g->beta == 0.0f;
    k.bias = g->bias != NULL;
    k.M = g->M, k.N = g->N, k.K = g->K, k.lda = g->lda, k.ldb = g->ldb, k.ldc = g->ldc;
    k.al[0] = align_of(g->a), k.al[1] = align_of(g->b), k.al[2] = align_of(g->c);
    k.al[3] = g->bias ? align_of(g->bias) : 0;
    uint64_t h = key_hash(&k);
    for (int i = 0; i < 8; i++) {   // 8 slots probed; a full neighbourhood replaces the first
        plan *e = &g_plans[(h + (uint64_t)i) & (CACHE - 1)];
        if (e->used && !memcmp(&e->k, &k, sizeof k)) return e;
        if (!e->used) {
            e->k = k;
            build(e, g);
            e->used = 1;
            return e;
        }
    }
    plan *e = &g_plans[h & (CACHE - 1)];
    drop(e);
    e->k = k;
    build(e, g);
    e->used = 1;
    return e;
}

int cu_lt_matmul(const cu_matmul_op *g) {
    if (!g_lt) os_die("CUDA backend: a product before cuBLASLt was opened (os_cuda_open)");
    plan *e = get_plan(g);
    if (e->none) return -1;
    if (g->bias)
        ok(p_cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias),
           "bias pointer", g);
    ok(p_cublasLtMatmul(g_lt, e->desc, &g->alpha, g->b, e->la, g->a, e->lb, &g->beta, g->c, e->lc, g->c, e->lc,
                        &e->algo, g_ws, WORKSPACE, cu_stream()), "matmul", g);
    return 0;
}
