// Runs one kernel (forward and backward) on inputs written by tests/test_kernels_torch.py, so that pytest can
// compare against PyTorch. usage: test_kernels_io DIR
//   DIR/spec.txt: "kernel NAME" then "key value" lines (sizes, eps, ...);
//   DIR/NAME.bin: raw little-endian inputs (float32; ids/labels/pos int32; keymask uint8).
// Writes DIR/o_NAME.bin (float32; xent loss float64, ncorrect int64). Gradients start from zero.
// Without arguments it prints this usage and exits 0 (make asan runs every test binary without arguments).
#include "core/alloc.h"
#include "core/ids.h"
#include "kernels/kernels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir;
static char kernel[64];
static char keys[32][32];
static double vals[32];
static int nkeys;
static void *bufs[64];   // every allocation, freed at exit (keeps LeakSanitizer quiet)
static int nbufs;

static void *alloc(size_t bytes, const char *what) {
    if (nbufs == 64) { fprintf(stderr, "test_kernels_io: too many buffers\n"); exit(2); }
    return bufs[nbufs++] = os_alloc(bytes, what);
}
static void free_all(void) {
    while (nbufs) os_free(bufs[--nbufs]);
}

static _Noreturn void fail(const char *fmt, const char *a, long long x, long long y) {
    fprintf(stderr, "test_kernels_io: ");
    fprintf(stderr, fmt, a, x, y);
    fprintf(stderr, "\n");
    exit(2);
}

static void read_spec(void) {
    char path[4096], k[32];
    snprintf(path, sizeof path, "%s/spec.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) fail("%s: cannot open", path, 0, 0);
    double v;
    while (nkeys < 32 && fscanf(f, "%31s", k) == 1) {
        if (!strcmp(k, "kernel")) {
            if (fscanf(f, "%63s", kernel) != 1) fail("%s: kernel: missing name", path, 0, 0);
        } else if (fscanf(f, "%lf", &v) == 1) {
            strcpy(keys[nkeys], k);
            vals[nkeys++] = v;
        } else
            fail("%s: %s: expected a number", path, 0, 0);
    }
    fclose(f);
}

static double P(const char *key) {
    for (int i = 0; i < nkeys; i++)
        if (!strcmp(keys[i], key)) return vals[i];
    fail("spec.txt: %s: missing", key, 0, 0);
}
static int64_t I(const char *key) { return (int64_t)P(key); }

static int has(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

// DIR/name.bin must hold exactly n elements of es bytes
static void *in(const char *name, int64_t n, size_t es) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) fail("%s: cannot open", path, 0, 0);
    fseek(f, 0, SEEK_END);
    long long got = ftell(f), want = (long long)n * (long long)es;
    if (got != want) fail("%s: size: expected %lld bytes, got %lld", path, want, got);
    fseek(f, 0, SEEK_SET);
    void *p = alloc((size_t)want, name);
    if (want && fread(p, 1, (size_t)want, f) != (size_t)want) fail("%s: short read", path, 0, 0);
    fclose(f);
    return p;
}
static float *inf(const char *name, int64_t n) { return in(name, n, sizeof(float)); }
static float *zeros(int64_t n) { return alloc((size_t)(n > 0 ? n : 1) * sizeof(float), "output"); }

static void out(const char *name, const void *p, int64_t n, size_t es) {
    char path[4096];
    snprintf(path, sizeof path, "%s/o_%s.bin", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, es, (size_t)n, f) != (size_t)n || fclose(f)) fail("%s: cannot write", path, 0, 0);
}
static void outf(const char *name, const float *p, int64_t n) { out(name, p, n, sizeof(float)); }

static void run_gemm(void) {
    int ta = (int)I("ta"), tb = (int)I("tb");
    int64_t M = I("M"), N = I("N"), K = I("K"), lda = I("lda"), ldb = I("ldb"), ldc = I("ldc");
    float *a = inf("a", (ta ? K : M) * lda), *b = inf("b", (tb ? N : K) * ldb), *c = inf("c", M * ldc);
    k_gemm(ta, tb, M, N, K, (float)P("alpha"), a, lda, b, ldb, (float)P("beta"), c, ldc);
    outf("c", c, M * ldc);
}

static void run_linear(void) {
    int64_t N = I("N"), Ii = I("I"), O = I("O");
    float *x = inf("inp", N * Ii), *w = inf("w", O * Ii), *b = has("bias") ? inf("bias", O) : NULL;
    float *dout = inf("dout", N * O), *y = zeros(N * O), *dx = zeros(N * Ii), *dw = zeros(O * Ii), *db = zeros(O);
    k_linear_fwd(y, x, w, b, N, Ii, O);
    k_linear_bwd(dx, dw, b ? db : NULL, dout, x, w, N, Ii, O);
    outf("out", y, N * O);
    outf("dinp", dx, N * Ii);
    outf("dw", dw, O * Ii);
    if (b) outf("dbias", db, O);
}

// ids [B, R, L]: out [B*L, C] the sum of the R rows' scale * table[id]; dtable from dout [B*L, C], the backward's
// list grouped by table row (core/ids.h os_ids_group), each id read by row (b, l) of dout
static void run_embedding(void) {
    int64_t B = I("B"), R = I("R"), L = I("L"), C = I("C"), V = I("V"), n = B * R * L;
    float s = (float)P("scale");
    int32_t *ids = in("ids", n, sizeof(int32_t));
    float *table = inf("table", V * C), *dout = inf("dout", B * L * C);
    float *y = zeros(B * L * C), *dt = zeros(V * C);
    int32_t *g = (int32_t *)zeros(3 * n + 1), *uniq = g, *start = g + n, *rows = g + 2 * n + 1;
    int64_t nu = os_ids_group(ids, n, uniq, start, rows);
    for (int64_t j = 0; j < n; j++) rows[j] = (int32_t)(rows[j] / (R * L) * L + rows[j] % L);
    k_embedding_fwd(y, ids, table, B, R, L, C, s);
    k_embedding_bwd(dt, uniq, start, rows, dout, nu, C, s);
    outf("out", y, B * L * C);
    outf("dtable", dt, V * C);
}

static void run_rmsnorm(void) {
    int64_t N = I("N"), C = I("C");
    float *x = inf("inp", N * C), *w = inf("w", C), *dout = inf("dout", N * C);
    float *y = zeros(N * C), *r = zeros(N), *dx = zeros(N * C), *dw = zeros(C);
    k_rmsnorm_fwd(y, r, x, NULL, w, N, C, (float)P("eps"));
    k_rmsnorm_bwd(dx, dw, dout, x, w, r, N, C);
    outf("out", y, N * C);
    outf("rstd", r, N);
    outf("dinp", dx, N * C);
    outf("dw", dw, C);
}

static void run_layernorm(void) {
    int64_t N = I("N"), C = I("C");
    float *x = inf("inp", N * C), *w = inf("w", C), *b = inf("b", C), *dout = inf("dout", N * C);
    float *y = zeros(N * C), *m = zeros(N), *r = zeros(N), *dx = zeros(N * C), *dw = zeros(C), *db = zeros(C);
    k_layernorm_fwd(y, m, r, x, w, b, N, C, (float)P("eps"));
    k_layernorm_bwd(dx, dw, db, dout, x, m, r, w, N, C);
    outf("out", y, N * C);
    outf("mean", m, N);
    outf("rstd", r, N);
    outf("dinp", dx, N * C);
    outf("dw", dw, C);
    outf("db", db, C);
}

static void run_rope(void) {
    int64_t B = I("B"), T = I("T"), H = I("H"), D = I("D"), n = B * T * H * D;
    int32_t *pos = in("pos", T, sizeof(int32_t));
    float *x = inf("x", n), *dx = inf("dout", n), *cs = zeros(T * (D / 2)), *sn = zeros(T * (D / 2));
    k_rope_table(cs, sn, pos, T, D, (float)P("theta"));
    k_rope_fwd(x, NULL, cs, sn, B, T, H, 0, D);
    k_rope_bwd(dx, NULL, cs, sn, B, T, H, 0, D);
    outf("cos", cs, T * (D / 2));
    outf("sin", sn, T * (D / 2));
    outf("out", x, n);
    outf("dx", dx, n);
}

static void run_attention(void) {
    int64_t B = I("B"), T = I("T"), H = I("H"), KH = I("KH"), D = I("D"), nq = B * T * H * D, nk = B * T * KH * D;
    float *q = inf("q", nq), *k = inf("k", nk), *v = inf("v", nk), *dout = inf("dout", nq);
    uint8_t *mask = has("keymask") ? in("keymask", B * T, 1) : NULL;
    float *y = zeros(nq), *att = zeros(B * H * T * T), *dq = zeros(nq), *dk = zeros(nk), *dv = zeros(nk);
    k_attention_fwd(y, att, q, k, v, mask, NULL, (int)I("causal"), B, T, H, KH, D);
    k_attention_bwd(dq, dk, dv, dout, q, k, v, y, att, mask, NULL, (int)I("causal"), B, T, H, KH, D, 1);
    outf("out", y, nq);
    outf("att", att, B * H * T * T);
    outf("dq", dq, nq);
    outf("dk", dk, nk);
    outf("dv", dv, nk);
}

static void run_swiglu(void) {
    int64_t N = I("N");
    float *g = inf("gate", N), *u = inf("up", N), *dout = inf("dout", N);
    float *y = zeros(N), *dg = zeros(N), *du = zeros(N);
    k_swiglu_fwd(y, g, u, N);
    k_swiglu_bwd(dg, du, dout, g, u, N, 1);
    outf("out", y, N);
    outf("dgate", dg, N);
    outf("dup", du, N);
}

static void run_unary(int gelu) {
    int64_t N = I("N");
    float *x = inf("inp", N), *dout = inf("dout", N), *y = zeros(N), *dx = zeros(N);
    (gelu ? k_gelu_fwd : k_relu_fwd)(y, x, N);
    (gelu ? k_gelu_bwd : k_relu_bwd)(dx, dout, x, N);
    outf("out", y, N);
    outf("dinp", dx, N);
}

static void run_conv1d(void) {
    int64_t Cin = I("Cin"), Tin = I("Tin"), Cout = I("Cout"), K = I("K"), st = I("stride"), pad = I("pad");
    int64_t Tout = (Tin + 2 * pad - K) / st + 1;
    float *x = inf("inp", Cin * Tin), *w = inf("w", Cout * Cin * K), *b = has("b") ? inf("b", Cout) : NULL;
    float *y = zeros(Cout * Tout);
    k_conv1d_fwd(y, x, w, b, Cin, Tin, Cout, K, st, pad);
    outf("out", y, Cout * Tout);
}

static void run_xent(void) {
    int64_t N = I("N"), V = I("V"), ld = I("ld"), nc = 0;
    float *x = inf("logits", N * ld);
    int32_t *lab = in("labels", N, sizeof(int32_t));
    double loss = k_xent_fwd_bwd(x, ld, lab, N, V, (float)P("dscale"), &nc);
    outf("grad", x, N * ld);
    out("loss", &loss, 1, sizeof loss);
    out("ncorrect", &nc, 1, sizeof nc);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        printf("usage: test_kernels_io DIR   (DIR/spec.txt + inputs; written by tests/test_kernels_torch.py)\n");
        return 0;
    }
    dir = argv[1];
    atexit(free_all);
    read_spec();
    static const struct {
        const char *name;
        void (*fn)(void);
    } tab[] = {{"gemm", run_gemm},     {"linear", run_linear},   {"embedding", run_embedding},
               {"rmsnorm", run_rmsnorm}, {"layernorm", run_layernorm}, {"rope", run_rope},
               {"attention", run_attention}, {"swiglu", run_swiglu}, {"conv1d", run_conv1d},
               {"xent", run_xent}};
    if (!strcmp(kernel, "gelu") || !strcmp(kernel, "relu")) {
        run_unary(kernel[0] == 'g');
        return 0;
    }
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(kernel, tab[i].name)) {
            tab[i].fn();
            return 0;
        }
    fail("spec.txt: kernel: unknown '%s'", kernel, 0, 0);
}
