// One GEMM library against another at the training step's own shapes, single-threaded (one core each, no
// thread pool in the way: the libraries' kernels compared as kernels). Driven by bench/bench_gemm.py, which builds
// it with whatever of oneDNN (HAVE_DNNL) and BLIS (HAVE_BLIS) is installed.
// usage: gemm_libs SECONDS ROUNDS SHAPE...   SHAPE = name:M:N:K:ta:tb  (row-major c[M,N] = op(a) @ op(b))
// Prints one line per shape, library and round: "name lib GFLOP/s"; the libraries alternate within each round
// (A B C A B C ...), so a disturbance of the shared machine hits them alike. Each figure is the best call of the
// round after one untimed warm-up call.
// Libraries: openblas (cblas_sgemm), openblas_bf16 (cblas_sbgemm), dnnl_sgemm, dnnl_f32 and dnnl_bf16 (matmul
// primitive, f32 or bf16 inputs, f32 output), blis (bli_sgemm). bf16 inputs are converted before timing.
#include "core/cpu.h"
#include "core/timer.h"
#ifdef HAVE_DNNL
#include "kernels/gemm.h"
#endif
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef HAVE_BLIS
void bli_init(void);
typedef enum { BT_NO = 0, BT_T = 8 } blis_trans;   // BLIS_NO_TRANSPOSE, BLIS_TRANSPOSE (blis.h's trans_t)
void bli_sgemm(blis_trans ta, blis_trans tb, int64_t m, int64_t n, int64_t k, const float *alpha, const float *a,
               int64_t rsa, int64_t csa, const float *b, int64_t rsb, int64_t csb, const float *beta, float *c,
               int64_t rsc, int64_t csc);
#endif

typedef struct {
    int64_t M, N, K, lda, ldb;
    int ta, tb;
    float *a, *b, *c;
    uint16_t *ab, *bb;
#ifdef HAVE_DNNL
    dnnl_primitive_t mm[2];   // f32, bf16
    dnnl_memory_t mem[2][3];
#endif
} prob;

static uint16_t to_bf16(float f) {   // round to nearest even (the inputs here are finite)
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static void run_openblas(prob *p) {
    cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, (int)p->M,
                (int)p->N, (int)p->K, 1.0f, p->a, (int)p->lda, p->b, (int)p->ldb, 0.0f, p->c, (int)p->N);
}
// Debian's OpenBLAS 0.3.21 is built without BUILD_BFLOAT16: cblas_sbgemm is looked up at run time
typedef void sbgemm_fn(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                       const uint16_t *, blasint, const uint16_t *, blasint, float, float *, blasint);
static sbgemm_fn *sbgemm;
static void run_openblas_bf16(prob *p) {
    sbgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, (int)p->M,
                 (int)p->N, (int)p->K, 1.0f, p->ab, (int)p->lda, p->bb, (int)p->ldb, 0.0f, p->c, (int)p->N);
}
#ifdef HAVE_DNNL
static dnnl_engine_t eng;
static dnnl_stream_t strm;
static void check(dnnl_status_t s, const char *what) {
    if (s != dnnl_success) fprintf(stderr, "oneDNN: %s failed (status %d)\n", what, (int)s), exit(1);
}
static void run_dnnl_sgemm(prob *p) {
    check(dnnl_sgemm(p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', p->M, p->N, p->K, 1.0f, p->a, p->lda, p->b, p->ldb, 0.0f,
                     p->c, p->N), "dnnl_sgemm");
}
static void dnnl_make(prob *p, int bf16) {   // the primitive omnishard's bf16 path builds (src/kernels/gemm_bf16.c)
    dnnl_memory_desc_t md[3];
    k_gemm_op g = {p->ta, p->tb, p->M, p->N, p->K, 1.0f, 0.0f, NULL, NULL, p->lda, p->ldb, p->N, NULL, 4};
    char impl[64] = "?";
    const char *what = k_onednn_matmul(eng, &g, bf16 ? dnnl_bf16 : dnnl_f32, &p->mm[bf16], md, impl);
    if (what) fprintf(stderr, "oneDNN: %s failed\n", what), exit(1);
    fprintf(stderr, "  dnnl %s %lldx%lldx%lld: %s\n", bf16 ? "bf16" : "f32", (long long)p->M, (long long)p->N,
            (long long)p->K, impl);
    void *ptr[3] = {bf16 ? (void *)p->ab : p->a, bf16 ? (void *)p->bb : p->b, p->c};
    for (int i = 0; i < 3; i++) check(dnnl_memory_create(&p->mem[bf16][i], &md[i], eng, ptr[i]), "memory");
}
static void run_dnnl_mm(prob *p, int bf16) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, p->mem[bf16][0]}, {DNNL_ARG_WEIGHTS, p->mem[bf16][1]},
                               {DNNL_ARG_DST, p->mem[bf16][2]}};
    check(dnnl_primitive_execute(p->mm[bf16], strm, 3, args), "execute");
    check(dnnl_stream_wait(strm), "wait");
}
// oneDNN's jit bf16 gemm behind the sgemm-like entry point its .so exports but its headers do not declare
typedef dnnl_status_t gemm_bf16_fn(char, char, dnnl_dim_t, dnnl_dim_t, dnnl_dim_t, float, const uint16_t *, dnnl_dim_t,
                                   const uint16_t *, dnnl_dim_t, float, float *, dnnl_dim_t);
static gemm_bf16_fn *gemm_bf16;
static void run_dnnl_gemm_bf16(prob *p) {
    check(gemm_bf16(p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', p->M, p->N, p->K, 1.0f, p->ab, p->lda, p->bb, p->ldb, 0.0f,
                    p->c, p->N), "dnnl_gemm_bf16bf16f32");
}
static void run_dnnl_f32(prob *p) { run_dnnl_mm(p, 0); }
static void run_dnnl_bf16(prob *p) { run_dnnl_mm(p, 1); }
#endif
#ifdef HAVE_BLIS
static void run_blis(prob *p) {
    const float one = 1.0f, zero = 0.0f;
    bli_sgemm(p->ta ? BT_T : BT_NO, p->tb ? BT_T : BT_NO, p->M, p->N, p->K, &one, p->a, p->lda, 1, p->b, p->ldb, 1,
              &zero, p->c, p->N, 1);
}
#endif

typedef struct {
    const char *name;
    void (*run)(prob *);
} lib;
static lib libs[] = {
    {"openblas", run_openblas},
#ifdef HAVE_DNNL
    {"dnnl_sgemm", run_dnnl_sgemm}, {"dnnl_f32", run_dnnl_f32},
#endif
#ifdef HAVE_BLIS
    {"blis", run_blis},
#endif
    {"openblas_bf16", run_openblas_bf16},
#ifdef HAVE_DNNL
    {"dnnl_bf16", run_dnnl_bf16}, {"dnnl_gemm_bf16", run_dnnl_gemm_bf16},
#endif
};
static int NLIB = sizeof libs / sizeof libs[0];

static double best_gflops(prob *p, const lib *l, double secs) {
    l->run(p);   // warm-up: packing buffers, JIT kernels, first touch of c
    double best = 1e30, total = 0;
    for (int rep = 0; rep < 2 || total < secs; rep++) {
        double t0 = os_now();
        l->run(p);
        double dt = os_now() - t0;
        best = dt < best ? dt : best, total += dt;
    }
    return 2.0 * (double)p->M * (double)p->N * (double)p->K / best * 1e-9;
}

int main(int argc, char **argv) {
    os_cpu_setup(argc, argv);   // the OpenBLAS core type omnishard runs with
    if (argc < 4) return fprintf(stderr, "usage: gemm_libs SECONDS ROUNDS name:M:N:K:ta:tb ...\n"), 2;
    double secs = atof(argv[1]);
    int rounds = atoi(argv[2]);
    omp_set_num_threads(1);
    *(void **)&sbgemm = dlsym(RTLD_DEFAULT, "cblas_sbgemm");
#ifdef HAVE_DNNL
    *(void **)&gemm_bf16 = dlsym(RTLD_DEFAULT, "dnnl_gemm_bf16bf16f32");
#endif
    for (int l = 0; l < NLIB; l++)   // drop what this build of the libraries lacks
        if ((!sbgemm && libs[l].run == run_openblas_bf16)
#ifdef HAVE_DNNL
            || (!gemm_bf16 && libs[l].run == run_dnnl_gemm_bf16)
#endif
        )
            memmove(&libs[l], &libs[l + 1], sizeof(lib) * (size_t)(--NLIB - l)), l--;
    openblas_set_num_threads(1);
#ifdef HAVE_DNNL
    check(dnnl_engine_create(&eng, dnnl_cpu, 0), "engine");
    check(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags), "stream");
#endif
#ifdef HAVE_BLIS
    bli_init();
#endif
    printf("# core=%s libs=", os_blas_coretype());
    for (int l = 0; l < NLIB; l++) printf("%s%s", l ? "," : "", libs[l].name);
    printf("\n");
    for (int s = 3; s < argc; s++) {
        char name[64];
        long long M, N, K;
        int ta, tb;
        if (sscanf(argv[s], "%63[^:]:%lld:%lld:%lld:%d:%d", name, &M, &N, &K, &ta, &tb) != 6)
            return fprintf(stderr, "bad shape '%s' (expected name:M:N:K:ta:tb)\n", argv[s]), 2;
        prob p = {.M = M, .N = N, .K = K, .ta = ta, .tb = tb, .lda = ta ? M : K, .ldb = tb ? K : N};
        int64_t na = M * K, nb = K * N;
        p.a = malloc(sizeof(float) * na), p.b = malloc(sizeof(float) * nb), p.c = calloc(M * N, sizeof(float));
        p.ab = malloc(2 * na), p.bb = malloc(2 * nb);
        for (int64_t i = 0; i < na; i++) p.a[i] = (float)((i * 7919 % 2001) - 1000) * 1e-3f, p.ab[i] = to_bf16(p.a[i]);
        for (int64_t i = 0; i < nb; i++) p.b[i] = (float)((i * 104729 % 2001) - 1000) * 1e-3f, p.bb[i] = to_bf16(p.b[i]);
#ifdef HAVE_DNNL
        dnnl_make(&p, 0), dnnl_make(&p, 1);
#endif
        for (int r = 0; r < rounds; r++)
            for (int l = 0; l < NLIB; l++) {
                printf("%s %s %.1f\n", name, libs[l].name, best_gflops(&p, &libs[l], secs));
                fflush(stdout);
            }
#ifdef HAVE_DNNL
        for (int i = 0; i < 2; i++) {
            dnnl_primitive_destroy(p.mm[i]);
            for (int j = 0; j < 3; j++) dnnl_memory_destroy(p.mem[i][j]);
        }
#endif
        free(p.a), free(p.b), free(p.c), free(p.ab), free(p.bb);
    }
    return 0;
}
