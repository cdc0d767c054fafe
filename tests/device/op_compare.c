// op_compare BACKEND [--json FILE] [--only OP[,OP...]] [--perturb OP]: every member of the device seam
// (kernels/ops.h) run on BACKEND and on the CPU backend (os_ops_cpu, the reference) with the same inputs, on odd
// shapes (T = 1, 7, 1000; a vocabulary of 1001 columns and the full 156160; GQA 14/2 heads of 64; element counts
// that are no multiple of 8), in fp32 and, for the products, bf16. One line per check:
//   op  dtype  shape  max_abs  max_rel  rel  tol  PASS|FAIL  [note]
// max_abs = max |got - want|, max_rel = max |got - want| / max(|want|, 1e-30), rel = ||got - want|| / ||want||
// (2-norms over the whole output). A check passes when rel <= tol, max_abs <= 10 * tol * max |want| (one wrong
// element fails however large the tensor) and every element the reference wrote is finite where the reference's is
// (outputs that are overwritten are filled with NaN before the call: an element the backend did not write fails).
// Tolerances (tol), by what an exact implementation of the same definition can differ in:
//   0      bit for bit: memory (alloc zeroed, upload/download, zero, copy), bf16 rounding, gathers, ReLU, counts
//   1e-6   elementwise float arithmetic (libm or device exp/erf/sqrt differ by an ulp or two; FMA contraction)
//   1e-5   fp32 reductions and products (another summation order: GEMM exact fp32, never TF32; attention, norms,
//          RoPE tables, convolution, cross-entropy, sums of squares)
//   1e-4   bf16 products (the same bf16-rounded operands and fp32 accumulation, in another order)
// BACKEND: cpu, guard (--device guard's backend: the CPU kernels on memory unreadable outside the seam's
// calls), cuda or cuda:N (make CUDA=1). Every check runs in a child process started before any backend call, so a
// check that crashes the backend (a signal, a CUDA error that stops the program) is reported as FAIL and the
// following checks still run. Exit status 0 when every check passes, 1 when one fails, 2 on bad arguments.
// --perturb OP adds an error to OP's first output after it is read back (tests/test_device_check.py: a wrong
// result is caught). tools/device-check.sh runs this on the lent GPU; docs/performance.md "Device check".
#include "cli/device.h"
#include "core/err.h"
#include "core/ids.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const os_ops *X;                   // the backend under test
static const os_ops *R = &os_ops_cpu;     // the reference (os_ops_cpu_open of X's precision)
static const char *g_backend;              // X's name (reopened in bf16 by set_bf16)
static const char *g_perturb, *g_json;
static int g_fd = -1;                     // pipe to the parent: "B i" (check i begins), "P" / "F" (a result)
static uint64_t g_key = 1234;

// ---- host buffers (reference inputs and outputs) and their copies on the backend ----
static float *rnd(int64_t n, float lo, float hi) {
    float *h = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    os_rng_fill_uniform(h, n, g_key++, 0, lo, hi);
    return h;
}
static void *hdup(const void *h, int64_t bytes) {
    void *p = malloc((size_t)(bytes > 0 ? bytes : 1));
    memcpy(p, h, (size_t)bytes);
    return p;
}
static void *up(const void *h, int64_t bytes) {      // a backend buffer holding h's bytes
    void *d = X->alloc(bytes, "op_compare input");
    if (bytes > 0) X->upload(d, h, bytes);
    return d;
}
static float *upnan(int64_t n) {                      // a backend buffer of n NaNs (an output that is overwritten)
    float *h = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) h[i] = NAN;
    float *d = up(h, (int64_t)sizeof(float) * n);
    free(h);
    return d;
}
static float *down(const void *d, int64_t n) {        // n floats read back from the backend
    float *h = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (n > 0) X->download(h, d, (int64_t)sizeof(float) * n);
    return h;
}
#define UPF(h, n) ((float *)up((h), (int64_t)sizeof(float) * (n)))
#define UPI(h, n) ((int32_t *)up((h), (int64_t)sizeof(int32_t) * (n)))

// ---- results ----
static void report(const char *op, const char *dtype, const char *shape, double max_abs, double max_rel,
                   double rel, double tol, int pass, const char *note) {
    printf("%-22s %-5s %-44s %9.2e %9.2e %9.2e %7.0e  %s%s%s\n", op, dtype, shape, max_abs, max_rel, rel, tol,
           pass ? "PASS" : "FAIL", note && *note ? "  " : "", note ? note : "");
    fflush(stdout);
    if (g_json) {
        FILE *f = fopen(g_json, "a");
        if (!f) os_die("op_compare: cannot append to %s", g_json);
#define JNUM(x) (isfinite(x) ? (x) : -1.0)
        fprintf(f, "{\"op\": \"%s\", \"dtype\": \"%s\", \"shape\": \"%s\", \"max_abs\": %.6e, \"max_rel\": %.6e, "
                   "\"rel\": %.6e, \"tol\": %.1e, \"pass\": %s, \"note\": \"%s\"}\n",
                op, dtype, shape, JNUM(max_abs), JNUM(max_rel), JNUM(rel), tol, pass ? "true" : "false",
                note ? note : "");
        if (fclose(f)) os_die("op_compare: writing %s failed", g_json);
    }
    if (g_fd >= 0 && write(g_fd, pass ? "P\n" : "F\n", 2) != 2) os_die("op_compare: the pipe to the parent broke");
}

// got (read back from the backend) against want (the CPU backend's), n floats; frees got
static void check(const char *op, const char *dtype, const char *shape, float *got, const float *want, int64_t n,
                  double tol) {
    if (g_perturb && !strcmp(g_perturb, op) && n > 0) got[0] += 1e-2f * (fabsf(want[0]) + 1.0f);
    double d2 = 0, w2 = 0, max_abs = 0, max_rel = 0, wmax = 0;
    int64_t bad = 0, unequal = 0;
    for (int64_t i = 0; i < n; i++) {
        double w = want[i], g = got[i];
        if (!isfinite(w)) {
            if (memcmp(&want[i], &got[i], sizeof(float))) bad++;
            continue;
        }
        if (!isfinite(g)) {
            bad++;
            continue;
        }
        double d = fabs(g - w);
        unequal += memcmp(&want[i], &got[i], sizeof(float)) != 0;
        d2 += d * d, w2 += w * w;
        max_abs = fmax(max_abs, d), wmax = fmax(wmax, fabs(w));
        max_rel = fmax(max_rel, d / fmax(fabs(w), 1e-30));
    }
    double rel = w2 > 0 ? sqrt(d2 / w2) : sqrt(d2);
    int pass = !bad && (tol == 0 ? !unequal : rel <= tol && max_abs <= 10 * tol * fmax(wmax, 1e-30));
    char note[96] = "";
    if (bad) snprintf(note, sizeof note, "%lld elements not finite or not written", (long long)bad);
    else if (tol == 0 && unequal) snprintf(note, sizeof note, "%lld elements differ", (long long)unequal);
    report(op, dtype, shape, bad ? INFINITY : max_abs, bad ? INFINITY : max_rel, bad ? INFINITY : rel, tol, pass, note);
    free(got);
}
// a backend output d of n floats against want; frees d on the backend
static void checkd(const char *op, const char *dtype, const char *shape, void *d, const float *want, int64_t n,
                   double tol) {
    check(op, dtype, shape, down(d, n), want, n, tol);
    X->free(d);
}
static void check_scalar(const char *op, const char *shape, double got, double want, double tol) {
    if (g_perturb && !strcmp(g_perturb, op)) got += 1e-2 * (fabs(want) + 1.0);
    double d = fabs(got - want), rel = d / fmax(fabs(want), 1e-30);
    report(op, "fp32", shape, d, rel, rel, tol, isfinite(got) && (tol == 0 ? got == want : rel <= tol), "");
}
static void check_info(const char *op, const char *shape, int pass, const char *note) {
    report(op, "-", shape, 0, 0, 0, 0, pass, note);
}

// ---- bf16 mode: the precision a backend is opened with (os_ops.bf16), the reference reopened with the same ----
static const os_ops *open_backend(const char *name, int bf16);
static void set_bf16(int on) {
    if (on && k_gemm_bf16_setup(NULL, NULL) < 0) os_die("op_compare: bf16 set-up: %s", os_errmsg());
    R = os_ops_cpu_open(on), X = open_backend(g_backend, on);
}
static const char *dt(void) { return X->bf16 ? "bf16" : "fp32"; }
static double tol_mm(void) { return X->bf16 ? 1e-4 : 1e-5; }

// ---- memory ----
static void t_memory(void) {
    const int64_t n = 1000003;   // bytes: no multiple of 8
    unsigned char *h = malloc((size_t)n), *z = calloc((size_t)n, 1), *back = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) h[i] = (unsigned char)(os_rng_u64(g_key, (uint64_t)i) >> 56);
    g_key++;
    void *d = X->alloc(n, "op_compare alloc");
    X->download(back, d, n);
    check_info("alloc", "1000003 bytes", !memcmp(back, z, (size_t)n), "zeroed");
    X->upload(d, h, n);
    memset(back, 0, (size_t)n);
    X->download(back, d, n);
    int same = !memcmp(back, h, (size_t)n);
    check_info("upload", "1000003 bytes", same, "bytes read back equal");
    // download of a part at an odd offset
    X->download(back, (unsigned char *)d + 13, 1001);
    check_info("download", "1001 bytes at offset 13", !memcmp(back, h + 13, 1001), "");
    X->free(d);
    d = X->alloc_uninit(n, "op_compare alloc_uninit");   // contents unspecified: written, then read back
    X->upload(d, h, n);
    memset(back, 0, (size_t)n);
    X->download(back, d, n);
    check_info("alloc_uninit", "1000003 bytes", !memcmp(back, h, (size_t)n), "written, read back equal");
    X->free(d);
    d = X->alloc_sparse(n, "op_compare alloc_sparse");   // zeroed; a small part written
    X->upload((unsigned char *)d + 4096, h, 77);
    X->download(back, d, n);
    int ok = !memcmp(back, z, 4096) && !memcmp(back + 4096, h, 77) && !memcmp(back + 4096 + 77, z, (size_t)n - 4096 - 77);
    check_info("alloc_sparse", "1000003 bytes, 77 written at 4096", ok, "zeroed around the part written");
    X->free(d);
    X->free(NULL);
    check_info("free", "buffers of the three allocs and NULL", 1, "");
    char note[64];
    snprintf(note, sizeof note, "%d (the host's memory: %s)", X->host_memory, X->host_memory ? "yes" : "no");
    check_info("host_memory", "-", X->host_memory == 0 || X->host_memory == 1, note);
    // held_bytes: NULL where the memory is the host's; else a buffer of n bytes adds at least n while it lives
    int hok = X->held_bytes == NULL ? X->host_memory == 1 : 0;
    if (X->held_bytes) {
        int64_t h0 = X->held_bytes();
        void *b = X->alloc(n, "op_compare held_bytes");
        int64_t h1 = X->held_bytes();
        X->free(b);
        hok = h0 >= 0 && h1 - h0 >= n && X->held_bytes() <= h1 - n;
        snprintf(note, sizeof note, "%lld bytes, %lld with 1000003 more", (long long)h0, (long long)h1);
    } else
        snprintf(note, sizeof note, "NULL (the host's memory)");
    check_info("held_bytes", "1000003 bytes allocated and freed", hok, note);
    free(h), free(z), free(back);
}

static void t_zero_copy(void) {
    const int64_t n = 1000003;
    float *a = rnd(n, -1, 1), *zero = calloc((size_t)n, sizeof(float));
    float *d = UPF(a, n);
    X->zero(d, n);
    checkd("zero", "fp32", "1000003", d, zero, n, 0);
    float *src = UPF(a, n), *dst = upnan(n);
    X->copy(dst, src, n);
    checkd("copy", "fp32", "1000003", dst, a, n, 0);
    X->free(src);
    free(a), free(zero);
}

// ---- products ----
static void gemm_case(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
    int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb, nc = M * ldc;
    float *a = rnd(na, -1, 1), *b = rnd(nb, -1, 1), *c = rnd(nc, -1, 1);
    float *want = hdup(c, (int64_t)sizeof(float) * nc);
    if (beta == 0)   // beta 0: c is not read (NaN there must not leak into the result)
        for (int64_t i = 0; i < nc; i++) c[i] = NAN, want[i] = NAN;
    os_tensor va = os_matf(a, ta ? K : M, ta ? M : K, lda), vb = os_matf(b, tb ? N : K, tb ? K : N, ldb);
    va = ta ? os_tensor_t(va) : va, vb = tb ? os_tensor_t(vb) : vb;
    os_tensor none = os_tensor_none();
    R->matmul(os_matf(want, M, N, ldc), va, vb, alpha, beta, none, none);
    float *da = UPF(a, na), *db = UPF(b, nb), *dc = UPF(c, nc);
    va.data = da, vb.data = db;
    X->matmul(os_matf(dc, M, N, ldc), va, vb, alpha, beta, none, none);
    // compare the rows' written columns only (the stride's padding is not the product's)
    float *got = down(dc, nc), *g2 = malloc(sizeof(float) * (size_t)(M * N)), *w2 = malloc(sizeof(float) * (size_t)(M * N));
    for (int64_t i = 0; i < M; i++)
        memcpy(g2 + i * N, got + i * ldc, sizeof(float) * (size_t)N), memcpy(w2 + i * N, want + i * ldc, sizeof(float) * (size_t)N);
    char s[64];
    snprintf(s, sizeof s, "%s%s M%lld N%lld K%lld b%g", ta ? "T" : "N", tb ? "T" : "N", (long long)M, (long long)N,
             (long long)K, beta);
    check("gemm", dt(), s, g2, w2, M * N, tol_mm());
    X->free(da), X->free(db), X->free(dc);
    free(a), free(b), free(c), free(want), free(got), free(w2);
}
static void t_gemm(void) {
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) gemm_case(ta, tb, 7, 1000, 97, 0.5f, ta ? 1.0f : 0.0f);
    gemm_case(0, 1, 1, 131, 896, 1.0f, 0.0f);
    gemm_case(0, 1, 1000, 1001, 64, 1.0f, 1.0f);
}

// a linear layer's products as matmul calls on backend t (model/linear.c's): out[N,O] = inp[N,I] @ w[O,I]^T + bias;
// dinp += dout @ w, dw += dout^T @ inp with dbias += dout's column sums
static void linear_fwd(const os_ops *t, float *out, const float *inp, const float *w, const float *bias, int64_t N,
                       int64_t I, int64_t O) {
    t->matmul(os_matf(out, N, O, O), os_matf(inp, N, I, I), os_tensor_t(os_matf(w, O, I, I)), 1.0f, 0.0f,
              os_vecf(bias, O), os_tensor_none());
}
static void linear_bwd(const os_ops *t, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                       const float *w, int64_t N, int64_t I, int64_t O) {
    os_tensor g = os_matf(dout, N, O, O);
    t->matmul(os_matf(dinp, N, I, I), g, os_matf(w, O, I, I), 1.0f, 1.0f, os_tensor_none(), os_tensor_none());
    t->matmul(os_matf(dw, O, I, I), os_tensor_t(g), os_matf(inp, N, I, I), 1.0f, 1.0f, os_tensor_none(),
              os_vecf(dbias, O));
}
static void linear_case(int64_t N, int64_t I, int64_t O, int bias) {
    float *inp = rnd(N * I, -1, 1), *w = rnd(O * I, -0.1f, 0.1f), *b = bias ? rnd(O, -1, 1) : NULL;
    float *want = malloc(sizeof(float) * (size_t)(N * O));
    linear_fwd(R, want, inp, w, b, N, I, O);
    float *di = UPF(inp, N * I), *dw = UPF(w, O * I), *db = bias ? UPF(b, O) : NULL, *dout = upnan(N * O);
    linear_fwd(X, dout, di, dw, db, N, I, O);
    char s[64];
    snprintf(s, sizeof s, "N%lld I%lld O%lld%s", (long long)N, (long long)I, (long long)O, bias ? " bias" : "");
    checkd("linear_fwd", dt(), s, dout, want, N * O, tol_mm());
    // backward: accumulates into non-zero gradients
    float *go = rnd(N * O, -1, 1), *gi = rnd(N * I, -1, 1), *gw = rnd(O * I, -1, 1), *gb = rnd(O, -1, 1);
    float *wi = hdup(gi, 4 * N * I), *ww = hdup(gw, 4 * O * I), *wb = hdup(gb, 4 * O);
    linear_bwd(R, wi, ww, bias ? wb : NULL, go, inp, w, N, I, O);
    float *dgo = UPF(go, N * O), *dgi = UPF(gi, N * I), *dgw = UPF(gw, O * I), *dgb = UPF(gb, O);
    linear_bwd(X, dgi, dgw, bias ? dgb : NULL, dgo, di, dw, N, I, O);
    checkd("linear_bwd", dt(), s, dgi, wi, N * I, tol_mm());
    checkd("linear_bwd", dt(), s, dgw, ww, O * I, tol_mm());
    if (bias) checkd("linear_bwd", dt(), s, dgb, wb, O, tol_mm());
    else X->free(dgb);
    X->free(di), X->free(dw), X->free(db), X->free(dgo);
    free(inp), free(w), free(b), free(want), free(go), free(gi), free(gw), free(gb), free(wi), free(ww), free(wb);
}
static void t_linear(void) {
    int64_t T[] = {1, 7, 1000};
    for (int i = 0; i < 3; i++) linear_case(T[i], 896, 131, i != 1);
    linear_case(7, 97, 4864, 0);
}

// ---- matmul on typed views: operands fp32 or bf16 (transposed views), c fp32 or bf16, bias, dbias ----
static float *widen16(const uint16_t *h, int64_t n) {   // host bf16 bits as floats
    float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&x[i], &u, 4);
    }
    return x;
}
// c[M,N] = alpha a @ b (+ bias) with a = op(A) (ta: A stored [K, M]), b = B^T stored [N, K]; abf/bbf: the
// operands given as bf16 (their fp32 values rounded by the reference's cast), cbf: c bf16, bias, dbias (of a)
static void matmul_case(int ta, int64_t M, int64_t N, int64_t K, int abf, int bbf, int cbf, int bias, int dbias) {
    int64_t lda = (ta ? M : K) + 3, ldb = K + 1, na = (ta ? K : M) * lda, nb = N * ldb;
    float *a = rnd(na, -1, 1), *b = rnd(nb, -1, 1), *bv = rnd(N, -1, 1), *db0 = rnd(M, -1, 1);
    uint16_t *a16 = malloc(2 * (size_t)na), *b16 = malloc(2 * (size_t)nb), *c16 = malloc(2 * (size_t)(M * N));
    R->cast(os_vec(a16, OS_BF16, na), os_vecf(a, na)), R->cast(os_vec(b16, OS_BF16, nb), os_vecf(b, nb));
    float *want = malloc(sizeof(float) * (size_t)(M * N)), *wdb = hdup(db0, 4 * M);
    os_tensor ha = abf ? os_mat(a16, OS_BF16, ta ? K : M, ta ? M : K, lda) : os_matf(a, ta ? K : M, ta ? M : K, lda);
    os_tensor hb = os_tensor_t(bbf ? os_mat(b16, OS_BF16, N, K, ldb) : os_matf(b, N, K, ldb));
    if (ta) ha = os_tensor_t(ha);
    os_tensor hbias = bias ? os_vecf(bv, N) : os_tensor_none(), hdb = dbias ? os_vecf(wdb, M) : os_tensor_none();
    R->matmul(cbf ? os_mat(c16, OS_BF16, M, N, N) : os_matf(want, M, N, N), ha, hb, 0.75f, 0.0f, hbias, hdb);
    if (cbf) free(want), want = widen16(c16, M * N);
    void *da = abf ? up(a16, 2 * na) : UPF(a, na), *dbm = bbf ? up(b16, 2 * nb) : UPF(b, nb);
    void *dc = cbf ? up(c16, 2 * M * N) : upnan(M * N);   // (a bf16 c: overwritten, beta 0)
    float *dbias_ = UPF(bv, N), *ddb = UPF(db0, M);
    os_tensor xa = ha, xb = hb;
    xa.data = da, xb.data = dbm;
    X->matmul(os_mat(dc, cbf ? OS_BF16 : OS_F32, M, N, N), xa, xb, 0.75f, 0.0f,
              bias ? os_vecf(dbias_, N) : os_tensor_none(), dbias ? os_vecf(ddb, M) : os_tensor_none());
    char s[96];
    snprintf(s, sizeof s, "%s M%lld N%lld K%lld a %s b %s c %s%s%s", ta ? "TT" : "NT", (long long)M, (long long)N,
             (long long)K, abf ? "bf16" : "fp32", bbf ? "bf16" : "fp32", cbf ? "bf16" : "fp32", bias ? " bias" : "",
             dbias ? " dbias" : "");
    float *got = cbf ? NULL : down(dc, M * N);
    if (cbf) {
        uint16_t *g16 = malloc(2 * (size_t)(M * N));
        X->download(g16, dc, 2 * M * N);
        got = widen16(g16, M * N);
        free(g16);
    }
    // a bf16 c: an fp32 result one summation order away may round to the neighbouring bf16 (2^-8 relative)
    check("matmul", dt(), s, got, want, M * N, cbf ? 1e-3 : tol_mm());
    if (dbias) checkd("matmul", dt(), "dbias of the same product", ddb, wdb, M, 1e-5);
    else X->free(ddb);
    X->free(da), X->free(dbm), X->free(dc), X->free(dbias_);
    free(a), free(b), free(bv), free(db0), free(a16), free(b16), free(c16), free(want), free(wdb);
}
static void t_matmul(void) {
    for (int ops = 0; ops < 4; ops++) matmul_case(ops & 1, 7, 1001, 97, ops & 1, ops >> 1, 0, 0, 0);
    matmul_case(0, 1000, 131, 896, 0, 0, 0, 1, 0);   // a linear layer's forward with its bias
    matmul_case(1, 131, 896, 1000, 0, 0, 0, 0, 1);   // its weight gradient with the bias gradient (a = dout^T)
    matmul_case(1, 131, 896, 1000, 1, 0, 0, 0, 1);   // the same with dout stored bf16 (the bias gradient of bf16 a)
    matmul_case(0, 7, 1001, 97, 1, 1, 1, 0, 0);      // bf16 in, bf16 out
    matmul_case(0, 1, 4864, 97, 0, 1, 1, 1, 0);      // one row, bias, bf16 out
}

// ---- bf16 conversions ----
// cast: fp32 -> bf16 (ties, signs, infinity, a subnormal; a vector, and a matrix's columns [7, 1000] of a row
// stride 1003 into a packed one), bf16 -> fp32 (into a strided matrix), and one dtype copied; bit for bit
static void cast_case(const char *s, os_dtype td, os_dtype ts, int64_t rows, int64_t cols, int64_t ldd, int64_t lds) {
    int64_t nd = rows * ldd, ns = rows * lds, ed = os_dtype_bytes(td), es = os_dtype_bytes(ts);
    float *a = rnd(ns, -3, 3);
    a[0] = 1.0f + 1.0f / 256, a[1] = 1.0f + 3.0f / 256, a[2] = -0.0f, a[3] = INFINITY, a[4] = 1e-40f;
    void *src = malloc((size_t)(ns * es)), *want = calloc((size_t)nd, (size_t)ed), *got = malloc((size_t)(nd * ed));
    if (ts == OS_BF16) R->cast(os_vec(src, OS_BF16, ns), os_vecf(a, ns));
    else memcpy(src, a, (size_t)(4 * ns));
    os_tensor hd = rows == 1 ? os_vec(want, td, cols) : os_mat(want, td, rows, cols, ldd);
    os_tensor hs = rows == 1 ? os_vec(src, ts, cols) : os_mat(src, ts, rows, cols, lds);
    R->cast(hd, hs);
    memset(got, 0xff, (size_t)(nd * ed));   // NaN bits before the call: an element the backend does not write differs
    void *dd = up(got, nd * ed), *ds = up(src, ns * es);
    os_tensor xd = hd, xs = hs;
    xd.data = dd, xs.data = ds;
    X->cast(xd, xs);
    X->download(got, dd, nd * ed);
    int64_t diff = 0;
    for (int64_t r = 0; r < rows; r++)
        diff += memcmp((char *)got + r * ldd * ed, (char *)want + r * ldd * ed, (size_t)(cols * ed)) != 0;
    char note[64];
    snprintf(note, sizeof note, "%lld of %lld rows differ", (long long)diff, (long long)rows);
    check_info("cast", s, diff == 0 && !(g_perturb && !strcmp(g_perturb, "cast")), note);
    X->free(dd), X->free(ds);
    free(a), free(src), free(want), free(got);
}
static void t_cast(void) {
    cast_case("fp32->bf16 100003 (ties, -0, inf, subnormal)", OS_BF16, OS_F32, 1, 100003, 100003, 100003);
    cast_case("fp32->bf16 [7,1000] ld 1003 -> packed", OS_BF16, OS_F32, 7, 1000, 1000, 1003);
    cast_case("bf16->fp32 [7,1000] packed -> ld 1003", OS_F32, OS_BF16, 7, 1000, 1003, 1000);
    cast_case("fp32->fp32 [7,1001] ld 1003 -> 1002", OS_F32, OS_F32, 7, 1001, 1002, 1003);
    cast_case("bf16->bf16 [7,1001] ld 1003 -> 1001", OS_BF16, OS_BF16, 7, 1001, 1001, 1003);
}

static void t_bf16(void) {
    set_bf16(1);
    check_info("bf16", "opened in bf16", X->bf16 == 1 && R->bf16 == 1, X->bf16 == 1 ? "1" : "not 1");
    t_gemm();
    t_linear();
    t_matmul();
    set_bf16(0);
    check_info("bf16", "opened in fp32", X->bf16 == 0, X->bf16 == 0 ? "0" : "not 0");
}

// ---- attention: q/out [B,T,H,D], k/v [B,T,KH,D], keymask [B,T], seg [B,T] ----
// bf16: the backend runs in bf16 mixed precision (a CUDA backend's tensor-core kernels, docs/design.md "CUDA kernels":
// its error bounds), the reference in fp32; tolerance 2e-2 (out) and 3e-2 (gradients) of the 2-norm: the bounds'
// worst case for these inputs (q, k in [-1, 1], D 64) is about 4e-2 elementwise, independent roundings give less
static void attention_case_in(int bf16, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D, int causal, int masked,
                              int segs) {
    int64_t nq = B * T * H * D, nk = B * T * KH * D;
    float *q = rnd(nq, -1, 1), *k = rnd(nk, -1, 1), *v = rnd(nk, -1, 1);
    uint8_t *mask = NULL;
    int32_t *seg = NULL;
    if (masked) {   // right padding of a different length per row; with B > 2 the last row all padding
        mask = malloc((size_t)(B * T));
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) mask[b * T + t] = b == B - 1 && B > 2 ? 0 : t < T - 1 - b;
    }
    if (segs) {     // packed samples: segments of 10, 15, then the rest (row b shifted by b)
        seg = malloc(sizeof(int32_t) * (size_t)(B * T));
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) seg[b * T + t] = t + b < 10 ? 0 : t + b < 25 ? 1 : 2;
    }
    int64_t ns = R->attention_stats_floats(B, T, H), xs = X->attention_stats_floats(B, T, H);
    float *out = malloc(sizeof(float) * (size_t)nq), *st = malloc(sizeof(float) * (size_t)ns);
    R->attention_fwd(out, st, q, k, v, mask, seg, causal, B, T, H, KH, D);
    float *dq_ = UPF(q, nq), *dk_ = UPF(k, nk), *dv_ = UPF(v, nk), *dout = upnan(nq), *dst = upnan(xs);
    uint8_t *dmask = mask ? up(mask, B * T) : NULL;
    int32_t *dseg = seg ? UPI(seg, B * T) : NULL;
    set_bf16(bf16);
    X->attention_fwd(dout, dst, dq_, dk_, dv_, dmask, dseg, causal, B, T, H, KH, D);
    set_bf16(0);
    char s[80];
    snprintf(s, sizeof s, "B%lld T%lld H%lld/%lld D%lld%s%s%s", (long long)B, (long long)T, (long long)H,
             (long long)KH, (long long)D, causal ? " causal" : "", masked ? " keymask" : "", segs ? " seg" : "");
    float *xout = down(dout, nq);   // the backend's own forward output feeds its backward
    const char *dtype = bf16 ? "bf16" : "fp32";
    check("attention_fwd", dtype, s, hdup(xout, 4 * nq), out, nq, bf16 ? 2e-2 : 1e-5);
    // backward from each backend's own forward (out, stats), accumulating into non-zero gradients
    float *go = rnd(nq, -1, 1), *gq = rnd(nq, -1, 1), *gk = rnd(nk, -1, 1), *gv = rnd(nk, -1, 1);
    float *wq = hdup(gq, 4 * nq), *wk = hdup(gk, 4 * nk), *wv = hdup(gv, 4 * nk);
    R->attention_bwd(wq, wk, wv, go, q, k, v, out, st, mask, seg, causal, B, T, H, KH, D, 1);
    float *dgo = UPF(go, nq), *dgq = UPF(gq, nq), *dgk = UPF(gk, nk), *dgv = UPF(gv, nk);
    set_bf16(bf16);
    X->attention_bwd(dgq, dgk, dgv, dgo, dq_, dk_, dv_, dout, dst, dmask, dseg, causal, B, T, H, KH, D, 1);
    set_bf16(0);
    checkd("attention_bwd", dtype, s, dgq, wq, nq, bf16 ? 3e-2 : 1e-5);
    checkd("attention_bwd", dtype, s, dgk, wk, nk, bf16 ? 3e-2 : 1e-5);
    checkd("attention_bwd", dtype, s, dgv, wv, nk, bf16 ? 3e-2 : 1e-5);
    // overwriting (acc 0): the backend's gradients NaN before
    R->attention_bwd(wq, wk, wv, go, q, k, v, out, st, mask, seg, causal, B, T, H, KH, D, 0);
    dgq = upnan(nq), dgk = upnan(nk), dgv = upnan(nk);
    set_bf16(bf16);
    X->attention_bwd(dgq, dgk, dgv, dgo, dq_, dk_, dv_, dout, dst, dmask, dseg, causal, B, T, H, KH, D, 0);
    set_bf16(0);
    snprintf(s + strlen(s), sizeof s - strlen(s), " acc 0");
    checkd("attention_bwd", dtype, s, dgq, wq, nq, bf16 ? 3e-2 : 1e-5);
    checkd("attention_bwd", dtype, s, dgk, wk, nk, bf16 ? 3e-2 : 1e-5);
    checkd("attention_bwd", dtype, s, dgv, wv, nk, bf16 ? 3e-2 : 1e-5);
    X->free(dq_), X->free(dk_), X->free(dv_), X->free(dout), X->free(dst), X->free(dgo), X->free(dmask), X->free(dseg);
    free(q), free(k), free(v), free(mask), free(seg), free(out), free(st), free(xout), free(go), free(gq), free(gk);
    free(gv), free(wq), free(wk), free(wv);
}
static void attention_case(int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D, int causal, int masked, int segs) {
    attention_case_in(0, B, T, H, KH, D, causal, masked, segs);
}
static void t_attention(void) {
    int64_t T[] = {1, 7, 1000};
    char note[96];
    snprintf(note, sizeof note, "B1 T1000 H14: %lld floats (reference %lld)", (long long)X->attention_stats_floats(1, 1000, 14),
             (long long)R->attention_stats_floats(1, 1000, 14));
    check_info("attention_stats_floats", "-", X->attention_stats_floats(1, 1000, 14) > 0, note);
    for (int i = 0; i < 3; i++) attention_case(1, T[i], 14, 2, 64, 1, 0, 0);
    attention_case(3, 7, 14, 2, 64, 1, 1, 0);    // padding, one row all padding
    attention_case(2, 33, 14, 2, 64, 1, 1, 1);   // packed samples (seg) with padding
    attention_case(2, 33, 4, 4, 16, 0, 0, 0);    // Whisper's: no mask, not causal, no grouping
}

// bf16 mode (tolerance 2e-2 as attention_case_in's out): on a CUDA backend the prefill rows (T 7, 300) run on its
// tensor cores, the decode rows (T 1) on its fp32 split-key kernel, as in fp32 mode (checked there at 1e-5)
static void cached_in(int bf16, int64_t p0, const int64_t *T, int nT) {   // q [B,T,H,D] at p0.. over kc/vc [B,S,KH,D]
    int64_t B = 2, H = 14, KH = 2, D = 64;
    for (int i = 0; i < nT; i++) {
        int64_t S = p0 + T[i] + 3, nq = B * T[i] * H * D, nc = B * S * KH * D;
        float *q = rnd(nq, -1, 1), *kc = rnd(nc, -1, 1), *vc = rnd(nc, -1, 1), *want = malloc(sizeof(float) * (size_t)nq);
        R->attention_cached_fwd(want, q, kc, vc, B, T[i], p0, S, H, KH, D);
        float *dq = UPF(q, nq), *dk = UPF(kc, nc), *dv = UPF(vc, nc), *dout = upnan(nq);
        set_bf16(bf16);
        X->attention_cached_fwd(dout, dq, dk, dv, B, T[i], p0, S, H, KH, D);
        set_bf16(0);
        char s[64];
        snprintf(s, sizeof s, "B2 T%lld p0 %lld S%lld H14/2 D64", (long long)T[i], (long long)p0, (long long)S);
        checkd("attention_cached_fwd", bf16 ? "bf16" : "fp32", s, dout, want, nq, bf16 ? 2e-2 : 1e-5);
        X->free(dq), X->free(dk), X->free(dv);
        free(q), free(kc), free(vc), free(want);
    }
}
static void t_attention_cached(void) {
    int64_t T[] = {1, 7};
    cached_in(0, 5, T, 2);
}

static void t_attention_bf16(void) {
    int64_t T[] = {1, 7, 1000};
    for (int i = 0; i < 3; i++) attention_case_in(1, 1, T[i], 14, 2, 64, 1, 0, 0);
    attention_case_in(1, 3, 7, 14, 2, 64, 1, 1, 0);      // padding, one row all padding
    attention_case_in(1, 2, 130, 14, 2, 64, 1, 1, 1);    // packed samples (seg) with padding, three key tiles
    attention_case_in(1, 1, 300, 28, 4, 128, 1, 0, 0);   // Qwen2.5-7B's heads
    attention_case_in(1, 2, 33, 4, 4, 64, 0, 0, 0);      // no mask, not causal, no grouping
    int64_t Tc[] = {1, 7, 300};
    cached_in(1, 700, Tc, 3);
}

// ---- norms ----
static void t_rmsnorm(void) {
    int64_t Ns[] = {1, 7, 1000}, Cs[] = {896, 97, 896};
    for (int i = 0; i < 3; i++) {
        int64_t N = Ns[i], C = Cs[i];
        float *x = rnd(N * C, -2, 2), *w = rnd(C, 0.5f, 1.5f), *out = malloc(sizeof(float) * (size_t)(N * C));
        float *rstd = malloc(sizeof(float) * (size_t)N);
        R->rmsnorm_fwd(out, rstd, x, NULL, w, N, C, 1e-6f);
        float *dx = UPF(x, N * C), *dw = UPF(w, C), *dout = upnan(N * C), *drstd = upnan(N);
        X->rmsnorm_fwd(dout, drstd, dx, NULL, dw, N, C, 1e-6f);
        char s[32];
        snprintf(s, sizeof s, "N%lld C%lld", (long long)N, (long long)C);
        checkd("rmsnorm_fwd", "fp32", s, dout, out, N * C, 1e-5);
        float *got_rstd = down(drstd, N);
        check("rmsnorm_fwd", "fp32", "rstd", got_rstd, rstd, N, 1e-5);
        float *go = rnd(N * C, -1, 1), *gi = rnd(N * C, -1, 1), *gw = rnd(C, -1, 1);
        float *wi = hdup(gi, 4 * N * C), *ww = hdup(gw, 4 * C);
        R->rmsnorm_bwd(wi, ww, go, x, w, rstd, N, C);
        float *dgo = UPF(go, N * C), *dgi = UPF(gi, N * C), *dgw = UPF(gw, C);
        X->rmsnorm_bwd(dgi, dgw, dgo, dx, dw, drstd, N, C);
        checkd("rmsnorm_bwd", "fp32", s, dgi, wi, N * C, 1e-5);
        checkd("rmsnorm_bwd", "fp32", s, dgw, ww, C, 1e-5);
        // with a residual: x += res, then its norm
        float *res = rnd(N * C, -1, 1), *xs = hdup(x, 4 * N * C), *dres = UPF(res, N * C), *dxs = UPF(x, N * C);
        R->rmsnorm_fwd(out, rstd, xs, res, w, N, C, 1e-6f);
        X->rmsnorm_fwd(dout = upnan(N * C), drstd, dxs, dres, dw, N, C, 1e-6f);
        snprintf(s, sizeof s, "N%lld C%lld res", (long long)N, (long long)C);
        checkd("rmsnorm_fwd", "fp32", s, dout, out, N * C, 1e-5);
        checkd("rmsnorm_fwd", "fp32", "the sum", dxs, xs, N * C, 0);
        X->free(dx), X->free(dw), X->free(drstd), X->free(dgo), X->free(dres);
        free(x), free(w), free(out), free(rstd), free(go), free(gi), free(gw), free(wi), free(ww), free(res), free(xs);
    }
}

static void t_layernorm(void) {
    int64_t N = 1000, C = 97;
    float *x = rnd(N * C, -2, 2), *w = rnd(C, 0.5f, 1.5f), *b = rnd(C, -1, 1);
    float *out = malloc(sizeof(float) * (size_t)(N * C)), *mean = malloc(sizeof(float) * (size_t)N);
    float *rstd = malloc(sizeof(float) * (size_t)N);
    R->layernorm_fwd(out, mean, rstd, x, w, b, N, C, 1e-5f);
    float *dx = UPF(x, N * C), *dw = UPF(w, C), *db = UPF(b, C), *dout = upnan(N * C), *dm = upnan(N), *dr = upnan(N);
    X->layernorm_fwd(dout, dm, dr, dx, dw, db, N, C, 1e-5f);
    checkd("layernorm_fwd", "fp32", "N1000 C97", dout, out, N * C, 1e-5);
    checkd("layernorm_fwd", "fp32", "mean", dm, mean, N, 1e-5);
    checkd("layernorm_fwd", "fp32", "rstd", dr, rstd, N, 1e-5);
    X->free(dx), X->free(dw), X->free(db);
    free(x), free(w), free(b), free(out), free(mean), free(rstd);
}

// ---- RoPE: tables cos/sin [T, D/2] for positions pos[T]; q [B,T,H,D] and k [B,T,KH,D] in place ----
static void t_rope(void) {
    int64_t B = 2, T = 1000, H = 14, KH = 2, D = 64, nt = T * D / 2, nx = B * T * H * D, nk = B * T * KH * D;
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)T);
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(t < 500 ? t : t + 3000);   // a jump, as packed samples
    float *ct = malloc(sizeof(float) * (size_t)nt), *st = malloc(sizeof(float) * (size_t)nt);
    R->rope_table(ct, st, pos, T, D, 1e6f);
    int32_t *dpos = UPI(pos, T);
    float *dct = upnan(nt), *dst = upnan(nt);
    X->rope_table(dct, dst, dpos, T, D, 1e6f);
    checkd("rope_table", "fp32", "cos T1000 D64 theta 1e6", dct, ct, nt, 1e-5);
    checkd("rope_table", "fp32", "sin T1000 D64 theta 1e6", dst, st, nt, 1e-5);
    // the rotations, from the reference's tables on both sides
    dct = UPF(ct, nt), dst = UPF(st, nt);
    float *x = rnd(nx, -1, 1), *want = hdup(x, 4 * nx), *dx = UPF(x, nx);
    float *k = rnd(nk, -1, 1), *wk = hdup(k, 4 * nk), *dk = UPF(k, nk);
    R->rope_fwd(want, wk, ct, st, B, T, H, KH, D);
    X->rope_fwd(dx, dk, dct, dst, B, T, H, KH, D);
    checkd("rope_fwd", "fp32", "q B2 T1000 H14 D64", dx, want, nx, 1e-6);
    checkd("rope_fwd", "fp32", "k B2 T1000 KH2 D64", dk, wk, nk, 1e-6);
    memcpy(want, x, sizeof(float) * (size_t)nx), dx = UPF(x, nx);
    memcpy(wk, k, sizeof(float) * (size_t)nk), dk = UPF(k, nk);
    R->rope_bwd(want, wk, ct, st, B, T, H, KH, D);
    X->rope_bwd(dx, dk, dct, dst, B, T, H, KH, D);
    checkd("rope_bwd", "fp32", "q B2 T1000 H14 D64", dx, want, nx, 1e-6);
    checkd("rope_bwd", "fp32", "k B2 T1000 KH2 D64", dk, wk, nk, 1e-6);
    X->free(dpos), X->free(dct), X->free(dst);
    free(pos), free(ct), free(st), free(x), free(want), free(k), free(wk);
}

// ---- embedding: table [V, C], ids [B, R, L] (repeated ids: the scatter-add's collisions); the backward's list
// grouped by table row (core/ids.h os_ids_group), each id read by row (b, l) of dout [B*L, C] ----
static void t_embedding(void) {
    int64_t V = 1001, C = 97, B = 2, Rr = 4, L = 125, N = B * Rr * L, M = B * L;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)N), *g = malloc(sizeof(int32_t) * (size_t)(3 * N + 1));
    for (int64_t i = 0; i < N; i++) ids[i] = (int32_t)(os_rng_u64(g_key, (uint64_t)i) % (i % 3 ? (uint64_t)V : 5));
    g_key++;
    float *tab = rnd(V * C, -1, 1), *want = malloc(sizeof(float) * (size_t)(M * C));
    R->embedding_fwd(want, ids, tab, B, Rr, L, C, 0.25f);
    int32_t *di = UPI(ids, N);
    float *dt_ = UPF(tab, V * C), *dout = upnan(M * C);
    X->embedding_fwd(dout, di, dt_, B, Rr, L, C, 0.25f);
    checkd("embedding_fwd", "fp32", "V1001 C97 B2 R4 L125 scale .25", dout, want, M * C, 0);
    int32_t *uniq = g, *start = g + N, *rows = g + 2 * N + 1;
    int64_t nu = os_ids_group(ids, N, uniq, start, rows);
    for (int64_t j = 0; j < N; j++) rows[j] = (int32_t)(rows[j] / (Rr * L) * L + rows[j] % L);
    float *go = rnd(M * C, -1, 1), *gt = rnd(V * C, -1, 1), *wt = hdup(gt, 4 * V * C);
    R->embedding_bwd(wt, uniq, start, rows, go, nu, C, 0.5f);
    int32_t *dg = UPI(g, 3 * N + 1);
    float *dgo = UPF(go, M * C), *dgt = UPF(gt, V * C);
    X->embedding_bwd(dgt, dg, dg + N, dg + 2 * N + 1, dgo, nu, C, 0.5f);
    checkd("embedding_bwd", "fp32", "V1001 C97 B2 R4 L125, ids repeated", dgt, wt, V * C, 1e-6);
    X->free(di), X->free(dt_), X->free(dgo), X->free(dg);
    free(ids), free(g), free(tab), free(want), free(go), free(gt), free(wt);
}

// ---- activations, convolution ----
static void t_activations(void) {
    const int64_t n = 1000003;
    float *g = rnd(n, -8, 8), *u = rnd(n, -2, 2), *want = malloc(sizeof(float) * (size_t)n);
    float *dg = UPF(g, n), *du = UPF(u, n), *dout;
    R->swiglu_fwd(want, g, u, n);
    X->swiglu_fwd(dout = upnan(n), dg, du, n);
    checkd("swiglu_fwd", "fp32", "1000003", dout, want, n, 1e-6);
    float *go = rnd(n, -1, 1), *gg = rnd(n, -1, 1), *gu = rnd(n, -1, 1), *wg = hdup(gg, 4 * n), *wu = hdup(gu, 4 * n);
    R->swiglu_bwd(wg, wu, go, g, u, n, 1);
    float *dgo = UPF(go, n), *dgg = UPF(gg, n), *dgu = UPF(gu, n);
    X->swiglu_bwd(dgg, dgu, dgo, dg, du, n, 1);
    checkd("swiglu_bwd", "fp32", "1000003", dgg, wg, n, 1e-6);
    checkd("swiglu_bwd", "fp32", "1000003", dgu, wu, n, 1e-6);
    R->swiglu_bwd(wg, wu, go, g, u, n, 0);   // overwriting (acc 0): the backend's gradients NaN before
    X->swiglu_bwd(dgg = upnan(n), dgu = upnan(n), dgo, dg, du, n, 0);
    checkd("swiglu_bwd", "fp32", "1000003 acc 0", dgg, wg, n, 1e-6);
    checkd("swiglu_bwd", "fp32", "1000003 acc 0", dgu, wu, n, 1e-6);
    R->gelu_fwd(want, g, n);
    X->gelu_fwd(dout = upnan(n), dg, n);
    checkd("gelu_fwd", "fp32", "1000003", dout, want, n, 1e-6);
    R->relu_fwd(want, g, n);
    X->relu_fwd(dout = upnan(n), dg, n);
    checkd("relu_fwd", "fp32", "1000003", dout, want, n, 0);
    float *y = hdup(want, 4 * n);   // a ReLU's output (zeros where g <= 0)
    memcpy(want, u, 4 * (size_t)n);
    R->relu_grad(want, y, n);
    float *dy = UPF(y, n);
    X->relu_grad(du, dy, n);
    checkd("relu_grad", "fp32", "1000003, in place", du, want, n, 0);
    du = UPF(u, n);
    for (int acc = 0; acc < 2; acc++) {   // LoRA's input dropout forward (acc 0) and its backward (acc 1)
        memcpy(want, g, 4 * (size_t)n);
        R->dropout(want, u, n, 0.1f, 77, acc);
        dout = UPF(g, n);
        X->dropout(dout, du, n, 0.1f, 77, acc);
        checkd("dropout", "fp32", acc ? "1000003 p .1, accumulate" : "1000003 p .1", dout, want, n, 1e-6);
    }
    X->free(dy);
    free(y);
    X->free(dg), X->free(du), X->free(dgo);
    free(g), free(u), free(want), free(go), free(gg), free(gu), free(wg), free(wu);
}

static void t_transpose(void) {   // nb batches of inp[R, C] -> out[nb, C, R]
    int64_t nb = 3, Rr = 80, C = 301, n = nb * Rr * C;
    float *x = rnd(n, -1, 1), *want = malloc(sizeof(float) * (size_t)n);
    R->transpose(want, x, nb, Rr, C);
    float *dx = UPF(x, n), *dout = upnan(n);
    X->transpose(dout, dx, nb, Rr, C);
    checkd("transpose", "fp32", "3 x [80, 301]", dout, want, n, 0);
    X->free(dx);
    free(x), free(want);
}

// bf16: both backends opened in bf16 (the reference's bf16 table rounds w and inp to bf16, fp32 sums): the bf16
// products' tolerance
static void conv1d_in(int bf16) {   // inp [Cin, Tin], w [Cout, Cin, K] -> out [Cout, Tout]
    int64_t Cin = 80, Tin = 301, Cout = 96, K = 3;
    set_bf16(bf16);
    for (int64_t stride = 1; stride <= 2; stride++) {
        int64_t Tout = (Tin + 2 - K) / stride + 1;
        float *x = rnd(Cin * Tin, -1, 1), *w = rnd(Cout * Cin * K, -0.2f, 0.2f), *b = rnd(Cout, -1, 1);
        float *want = malloc(sizeof(float) * (size_t)(Cout * Tout));
        R->conv1d_fwd(want, x, w, b, Cin, Tin, Cout, K, stride, 1);
        float *dx = UPF(x, Cin * Tin), *dw = UPF(w, Cout * Cin * K), *db = UPF(b, Cout), *dout = upnan(Cout * Tout);
        X->conv1d_fwd(dout, dx, dw, db, Cin, Tin, Cout, K, stride, 1);
        char s[64];
        snprintf(s, sizeof s, "Cin80 Tin301 Cout96 K3 stride %lld pad 1", (long long)stride);
        checkd("conv1d_fwd", dt(), s, dout, want, Cout * Tout, tol_mm());
        X->free(dx), X->free(dw), X->free(db);
        free(x), free(w), free(b), free(want);
    }
    set_bf16(0);
}
static void t_conv1d(void) { conv1d_in(0); }
static void t_conv1d_bf16(void) { conv1d_in(1); }

// ---- softmax cross-entropy: logits [N, V] (row stride ld) overwritten by the gradient; scalars accumulate ----
static void xent_case(int64_t N, int64_t V, int64_t ld) {
    float *lg = rnd(N * ld, -4, 4);
    int32_t *lab = malloc(sizeof(int32_t) * (size_t)N);
    for (int64_t i = 0; i < N; i++) lab[i] = i % 5 == 3 ? -100 : (int32_t)(os_rng_u64(g_key, (uint64_t)i) % (uint64_t)V);
    g_key++;
    for (int64_t i = 0; i < N; i += 4)   // some rows whose label is their argmax
        if (lab[i] >= 0) lg[i * ld + lab[i]] = 9.0f;
    float *want = hdup(lg, 4 * N * ld);
    double sum0 = 1.5, wsum = sum0, gsum;
    int64_t wcor = 2, gcor;
    R->xent_fwd_bwd(want, ld, lab, N, V, 0.5f, &wsum, &wcor);
    float *dl = UPF(lg, N * ld);
    int32_t *dlab = UPI(lab, N);
    double *dsum = up(&sum0, sizeof(double));
    int64_t two = 2, *dcor = up(&two, sizeof(int64_t));
    X->xent_fwd_bwd(dl, ld, dlab, N, V, 0.5f, dsum, dcor);
    X->download(&gsum, dsum, sizeof(double)), X->download(&gcor, dcor, sizeof(int64_t));
    char s[64];
    snprintf(s, sizeof s, "N%lld V%lld ld%lld", (long long)N, (long long)V, (long long)ld);
    float *got = down(dl, N * ld);   // the gradient columns only (the stride's padding is not the kernel's)
    float *g2 = malloc(sizeof(float) * (size_t)(N * V)), *w2 = malloc(sizeof(float) * (size_t)(N * V));
    for (int64_t i = 0; i < N; i++)
        memcpy(g2 + i * V, got + i * ld, 4 * (size_t)V), memcpy(w2 + i * V, want + i * ld, 4 * (size_t)V);
    check("xent_fwd_bwd", "fp32", s, g2, w2, N * V, 1e-5);
    check_scalar("xent_fwd_bwd", "loss sum (accumulated)", gsum, wsum, 1e-5);
    char note[64];
    snprintf(note, sizeof note, "correct %lld, reference %lld", (long long)gcor, (long long)wcor);
    check_info("xent_fwd_bwd", "correct count (accumulated)", gcor == wcor, note);
    X->free(dl), X->free(dlab), X->free(dsum), X->free(dcor);
    free(lg), free(lab), free(want), free(got), free(w2);
}
static void t_xent(void) {
    xent_case(1000, 1001, 1004);
    xent_case(7, 156160, 156160);
    xent_case(1, 4160, 4160);
}

// ---- elementwise, sums ----
static void t_elementwise(void) {
    const int64_t n = 1000003;
    float *a = rnd(n, -1, 1), *b = rnd(n, -1, 1), *want = malloc(sizeof(float) * (size_t)n);
    float *da = UPF(a, n), *db = UPF(b, n), *d;
    R->add(want, a, b, n);
    X->add(d = upnan(n), da, db, n);
    checkd("add", "fp32", "1000003", d, want, n, 1e-6);
    R->add(want, a, b, n);          // out aliasing an input
    X->add(da, da, db, n);
    check("add", "fp32", "1000003, out == a", down(da, n), want, n, 1e-6);
    X->upload(da, a, 4 * n);
    memcpy(want, b, 4 * (size_t)n);
    R->axpy(want, -0.37f, a, n);
    X->axpy(db, -0.37f, da, n);
    check("axpy", "fp32", "1000003", down(db, n), want, n, 1e-6);
    memcpy(want, a, 4 * (size_t)n);
    R->scale(want, 0.3f, n);
    X->scale(da, 0.3f, n);
    check("scale", "fp32", "1000003", down(da, n), want, n, 1e-6);
    double ws, gs;
    R->sumsq(a, n, &ws);
    X->upload(da, a, 4 * n);
    double *ds = X->alloc(sizeof(double), "op_compare sumsq");
    X->sumsq(da, n, ds);
    X->download(&gs, ds, sizeof(double));
    check_scalar("sumsq", "1000003", gs, ws, 1e-5);
    X->sumsq(da, 0, ds);
    X->download(&gs, ds, sizeof(double));
    check_scalar("sumsq", "0 elements", gs, 0.0, 0);
    int64_t at[] = {-1, 999983, 17}, *di = X->alloc(sizeof(int64_t), "op_compare first_nonfinite");
    for (int i = 0; i < 3; i++) {   // none; a NaN near the end; an infinity before a later NaN
        memcpy(want, a, 4 * (size_t)n);
        if (at[i] >= 0) want[at[i]] = i == 1 ? NAN : INFINITY, want[n - 1] = NAN;
        X->upload(da, want, 4 * n);
        int64_t w = k_first_nonfinite(want, n), g = -2;
        X->first_nonfinite(da, n, di);
        X->download(&g, di, sizeof g);
        char s[48], note[64];
        snprintf(s, sizeof s, "1000003, %s", i == 0 ? "all finite" : i == 1 ? "NaN at 999983" : "inf at 17");
        snprintf(note, sizeof note, "index %lld, reference %lld", (long long)g, (long long)w);
        check_info("first_nonfinite", s, g == w && !(g_perturb && !strcmp(g_perturb, "first_nonfinite")), note);
    }
    X->free(da), X->free(db), X->free(ds), X->free(di);
    free(a), free(b), free(want);
}

static void t_adamw(void) {
    const int64_t n = 1000003;
    for (int64_t step = 1; step <= 3; step += 2) {
        float *p = rnd(n, -1, 1), *g = rnd(n, -1, 1), *m = rnd(n, -0.1f, 0.1f), *v = rnd(n, 0, 0.01f);
        float *wp = hdup(p, 4 * n), *wg = hdup(g, 4 * n), *wm = hdup(m, 4 * n), *wv = hdup(v, 4 * n);
        R->adamw(wp, wg, wm, wv, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.5f, step);
        float *dp = UPF(p, n), *dg = UPF(g, n), *dm = UPF(m, n), *dv = UPF(v, n);
        X->adamw(dp, dg, dm, dv, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.5f, step);
        char s[64];
        snprintf(s, sizeof s, "1000003 step %lld wd .1 gscale .5", (long long)step);
        checkd("adamw", "fp32", s, dp, wp, n, 1e-6);
        checkd("adamw", "fp32", "m", dm, wm, n, 1e-6);
        checkd("adamw", "fp32", "v", dv, wv, n, 1e-6);
        checkd("adamw", "fp32", "g (zeroed)", dg, wg, n, 0);
        free(p), free(g), free(m), free(v), free(wp), free(wg), free(wm), free(wv);
    }
}

// ---- rows by an index list: gather (a row with idx < 0 left as it is), scatter-add (repeated rows in order); a row
// broadcast over rows ----
static void t_rows(void) {
    int64_t V = 1001, C = 97, n = 1000;
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        idx[i] = i % 7 == 3 ? -1 : i % 5 == 1 ? 17 : (int32_t)(os_rng_u64(g_key, (uint64_t)i) % (uint64_t)V);
    g_key++;
    float *src = rnd(V * C, -1, 1), *out = rnd(n * C, -1, 1), *want = hdup(out, 4 * n * C);
    R->gather_rows(want, src, idx, n, C);
    float *dsrc = UPF(src, V * C), *dout = UPF(out, n * C);
    int32_t *didx = UPI(idx, n);
    X->gather_rows(dout, dsrc, didx, n, C);
    checkd("gather_rows", "fp32", "V1001 C97 n1000, idx < 0 kept", dout, want, n * C, 0);
    float *rows = rnd(n * C, -1, 1), *dst = rnd(V * C, -1, 1), *wd = hdup(dst, 4 * V * C);
    R->scatter_add_rows(wd, rows, idx, n, C);
    float *drows = UPF(rows, n * C), *ddst = UPF(dst, V * C);
    X->scatter_add_rows(ddst, drows, didx, n, C);
    checkd("scatter_add_rows", "fp32", "V1001 C97 n1000, rows repeated", ddst, wd, V * C, 0);
    X->free(dsrc), X->free(didx), X->free(drows);
    free(idx), free(src), free(out), free(want), free(rows), free(dst), free(wd);
    // a row broadcast: x[n, C] += b each row; out[C] += the rows of x in order (more rows than a block's threads)
    float *x = rnd(n * C, -1, 1), *b = rnd(C, -1, 1), *wx = hdup(x, 4 * n * C), *o = rnd(C, -1, 1), *wo = hdup(o, 4 * C);
    R->add_row_bias(wx, b, n, C);
    R->sum_rows(wo, x, n, C);
    float *dx = UPF(x, n * C), *db = UPF(b, C), *dsum = UPF(o, C);
    X->sum_rows(dsum, dx, n, C);
    checkd("sum_rows", "fp32", "n1000 C97, rows in order", dsum, wo, C, 0);
    X->add_row_bias(dx, db, n, C);
    checkd("add_row_bias", "fp32", "n1000 C97", dx, wx, n * C, 0);
    X->free(db);
    free(x), free(b), free(wx), free(o), free(wo);
}

// ---- the checks, in the order they run; the members each covers ----
typedef struct {
    const char *name, *members;
    void (*run)(void);
} check_fn;
static const check_fn TESTS[] = {
    {"memory", "alloc alloc_uninit alloc_sparse free host_memory held_bytes upload download", t_memory},
    {"zero_copy", "zero copy", t_zero_copy},
    {"gemm", "matmul", t_gemm},
    {"linear", "matmul", t_linear},
    {"matmul", "matmul", t_matmul},
    {"cast", "cast", t_cast},
    {"bf16", "bf16 matmul", t_bf16},
    {"attention", "attention_stats_floats attention_fwd attention_bwd", t_attention},
    {"attention_cached", "attention_cached_fwd", t_attention_cached},
    {"attention_bf16", "attention_fwd attention_bwd attention_cached_fwd", t_attention_bf16},
    {"rmsnorm", "rmsnorm_fwd rmsnorm_bwd", t_rmsnorm},
    {"layernorm", "layernorm_fwd", t_layernorm},
    {"rope", "rope_table rope_fwd rope_bwd", t_rope},
    {"embedding", "embedding_fwd embedding_bwd", t_embedding},
    {"rows", "gather_rows scatter_add_rows add_row_bias sum_rows", t_rows},
    {"activations", "swiglu_fwd swiglu_bwd gelu_fwd relu_fwd relu_grad dropout", t_activations},
    {"transpose", "transpose", t_transpose},
    {"conv1d", "conv1d_fwd", t_conv1d},
    {"conv1d_bf16", "conv1d_fwd", t_conv1d_bf16},
    {"xent", "xent_fwd_bwd", t_xent},
    {"elementwise", "add axpy scale sumsq first_nonfinite", t_elementwise},
    {"adamw", "adamw", t_adamw},
};
enum { NTESTS = sizeof TESTS / sizeof TESTS[0] };

// every member of the seam (kernels/ops_list.h) is in some check's members: a member without a check stops
// every run of op_compare (exit status 2, naming it), so the tests that run it fail until its check is added
static int uncovered(void) {
    int missing = 0;
#define COVERED(name, ...)                                                                                            \
    {                                                                                                                 \
        int found = 0;                                                                                                \
        for (int t = 0; t < NTESTS && !found; t++)                                                                    \
            for (const char *p = TESTS[t].members; !found && (p = strstr(p, #name)); p += strlen(#name))              \
                found = (p == TESTS[t].members || p[-1] == ' ') && (p[strlen(#name)] == 0 || p[strlen(#name)] == ' '); \
        if (!found) fprintf(stderr, "op_compare: the seam's member %s has no check (add one to TESTS)\n", #name);  \
        missing += !found;                                                                                            \
    }
    OS_OPS_LIST(COVERED)
#undef COVERED
    return missing;
}

static int wanted(const char *only, const check_fn *t) {
    if (!only) return 1;
    size_t n = strlen(t->name);
    for (const char *p = only; (p = strstr(p, t->name)); p += n)
        if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

static const os_ops *open_backend(const char *name, int bf16) {
    if (!strcmp(name, "cpu")) return os_ops_cpu_open(bf16);
    if (!strcmp(name, "guard")) {   // strict: a member given host memory stops (every pointer here is the backend's)
        os_guard_set_strict(1);
        return os_ops_guard_open(bf16);
    }
    if (strncmp(name, "cuda", 4)) os_die("op_compare: backend '%s': expected cpu, guard, cuda or cuda:N", name);
    if (os_cli_device_open(name, 0, bf16) < 0) os_die("op_compare: backend '%s': %s", name, os_errmsg());   // no TF32
    return os_k;
}

// the child: opens the backend, runs the checks from `first` on, announcing each on the pipe
static _Noreturn void child(const char *backend, const char *only, int first) {
    g_backend = backend, X = open_backend(backend, 0);
    for (int i = first; i < NTESTS; i++) {
        if (!wanted(only, &TESTS[i])) continue;
        char msg[16];
        int len = snprintf(msg, sizeof msg, "B %d\n", i);
        if (write(g_fd, msg, (size_t)len) != len) os_die("op_compare: the pipe to the parent broke");
        g_key = 1000003u * (uint64_t)(i + 1);   // the same inputs whichever checks ran before
        TESTS[i].run();
    }
    exit(0);
}

int main(int argc, char **argv) {
    const char *backend = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) g_json = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--perturb") && i + 1 < argc) g_perturb = argv[++i];
        else if (argv[i][0] != '-' && !backend) backend = argv[i];
        else {
            fprintf(stderr, "usage: op_compare cpu|guard|cuda|cuda:N [--json FILE] [--only CHECK,...] [--perturb OP]\n"
                            "checks:");
            for (int t = 0; t < NTESTS; t++) fprintf(stderr, " %s", TESTS[t].name);
            fprintf(stderr, "\n");
            return 2;
        }
    }
    if (uncovered()) return 2;
    if (!backend) return fprintf(stderr, "op_compare: name the backend to test (cpu, guard, cuda, cuda:N)\n"), 2;
    if (g_json) {
        FILE *f = fopen(g_json, "w");
        if (!f || fclose(f)) return fprintf(stderr, "op_compare: cannot write %s\n", g_json), 2;
    }
    printf("%-22s %-5s %-44s %9s %9s %9s %7s  %s\n", "op", "dtype", "shape", "max_abs", "max_rel", "rel", "tol", "result");
    fflush(stdout);
    int npass = 0, nfail = 0, first = 0;
    while (first < NTESTS) {
        int fd[2];
        if (pipe(fd)) os_die("op_compare: pipe failed");
        pid_t pid = fork();
        if (pid < 0) os_die("op_compare: fork failed");
        if (pid == 0) {
            close(fd[0]), g_fd = fd[1];
            child(backend, only, first);
        }
        close(fd[1]);
        FILE *in = fdopen(fd[0], "r");
        char line[64];
        int cur = -1;
        while (fgets(line, sizeof line, in)) {
            if (line[0] == 'B') cur = atoi(line + 2);
            else if (line[0] == 'P') npass++;
            else if (line[0] == 'F') nfail++;
        }
        fclose(in);
        int st;
        if (waitpid(pid, &st, 0) < 0) os_die("op_compare: waitpid failed");
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) break;
        char note[96];
        if (WIFSIGNALED(st)) snprintf(note, sizeof note, "the check stopped the program: signal %d", WTERMSIG(st));
        else snprintf(note, sizeof note, "the check stopped the program: exit status %d", WEXITSTATUS(st));
        if (cur < 0) {   // the backend did not open
            report("(backend)", "-", backend, 0, 0, 0, 0, 0, note);
            nfail++;
            break;
        }
        report(TESTS[cur].name, "-", TESTS[cur].members, 0, 0, 0, 0, 0, note);
        nfail++;
        first = cur + 1;
    }
    printf("op_compare %s: %d checks passed, %d failed\n", backend, npass, nfail);
    return nfail ? 1 : 0;
}
