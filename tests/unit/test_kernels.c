// Unit tests of src/kernels: every backward against central finite differences (in double) of
// L = sum(dout * fwd(x)), forwards against direct loops in double, and the interface rules
// (accumulation, NULL gradients, masks, ignored rows, zero sizes). Tiny sizes: every coordinate is checked.
#include "core/alloc.h"
#include "core/ids.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int npass, nfail;
static int g_acc = 1;   // the acc argument of the backwards that take one

static int check(const char *name, int ok, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("%s %s: %s\n", ok ? "ok  " : "FAIL", name, msg);
    ok ? npass++ : nfail++;
    return ok;
}

// ---- arrays: allocations of one check, freed together ----
static void *pool[256];
static int npool;
static float *fa(int64_t n) { return pool[npool++] = os_alloc((size_t)(n > 0 ? n : 1) * sizeof(float), "test"); }
static float *rnd(int64_t n, uint64_t key, float lo, float hi) {
    float *x = fa(n);
    os_rng_fill_uniform(x, n, key, 0, lo, hi);
    return x;
}
static float *dup(const float *x, int64_t n) { return memcpy(fa(n), x, (size_t)n * sizeof(float)); }
static void pool_free(void) {
    while (npool) os_free(pool[--npool]);
}

static double dot(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}
// max |a - b| / max(max |b|, 1e-6): a relative error scaled by the largest reference value
static double maxrel(const float *a, const double *b, int64_t n) {
    double e = 0, m = 1e-6;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs(a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return e / m;
}
static double maxrelf(const float *a, const float *b, int64_t n) {
    double e = 0, m = 1e-6;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return e / m;
}
static int allfinite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

// ---- a backward under test: up to 3 inputs with their gradients ----
typedef struct Case {
    const char *name;
    int n;                        // number of differentiable inputs
    float *x[3];                  // the inputs (perturbed in place by the finite differences)
    int64_t size[3];
    int overwrite;                // backward overwrites instead of accumulating (rope, xent)
    int has_acc;                  // backward takes acc (g_acc: 1 accumulates, 0 overwrites)
    double (*loss)(struct Case *);   // L = sum(dout * fwd(x)) in double
    void (*bwd)(struct Case *, float **g);   // g[i] += dL/dx[i]; g[i] may be NULL
    // kernel arguments
    int64_t N, C, I, O, B, T, H, KH, D, V, ld, R;
    int causal;
    float eps, scale;
    const float *w, *dout;
    float *out, *s1, *s2;   // scratch
    const int32_t *ids;
    const uint8_t *mask;
    const int32_t *seg;     // attention segment ids [B,T] (NULL: one segment per row)
} Case;

// central differences over every coordinate; returns the worst scaled error over the inputs
static double fd_check(Case *c, float h, char *detail, size_t dlen) {
    double worst = 0;
    size_t used = 0;
    for (int a = 0; a < c->n; a++) {
        int64_t n = c->size[a];
        float *g = fa(n);
        float *gs[3] = {NULL, NULL, NULL};
        gs[a] = g;
        c->bwd(c, gs);
        double *fd = (double *)fa(2 * n);
        float *x = c->x[a];
        for (int64_t i = 0; i < n; i++) {
            float x0 = x[i], xp = x0 + h, xm = x0 - h;
            x[i] = xp;
            double lp = c->loss(c);
            x[i] = xm;
            double lm = c->loss(c);
            x[i] = x0;
            fd[i] = (lp - lm) / ((double)xp - (double)xm);
        }
        double e = maxrel(g, fd, n);
        worst = fmax(worst, e);
        used += (size_t)snprintf(detail + used, used < dlen ? dlen - used : 0, "%sd%d %.1e", a ? ", " : "", a, e);
    }
    return worst;
}

static void check_fd(Case *c, float h, double tol) {
    char d[160];
    double e = fd_check(c, h, d, sizeof d);
    char name[80];
    snprintf(name, sizeof name, "%s backward vs finite differences", c->name);
    check(name, e < tol, "max scaled error %s (tol %.0e)", d, tol);
}

// ---- the kernels as Cases ----
static double loss_linear(Case *c) {
    k_linear_fwd(c->out, c->x[0], c->x[1], c->x[2], c->N, c->I, c->O);
    return dot(c->out, c->dout, c->N * c->O);
}
static void bwd_linear(Case *c, float **g) {
    k_linear_bwd(g[0], g[1], g[2], c->dout, c->x[0], c->x[1], c->N, c->I, c->O);
}
static void case_linear(Case *c) {
    *c = (Case){.name = "linear", .n = 3, .N = 5, .I = 7, .O = 6, .loss = loss_linear, .bwd = bwd_linear};
    c->x[0] = rnd(c->size[0] = 35, 1, -1, 1);
    c->x[1] = rnd(c->size[1] = 42, 2, -1, 1);
    c->x[2] = rnd(c->size[2] = 6, 3, -1, 1);
    c->dout = rnd(30, 4, -1, 1);
    c->out = fa(30);
}

// ids [B = 1, R, T]: out [T, C] the sum of the R rows' scale * table[id]
static double loss_embedding(Case *c) {
    k_embedding_fwd(c->out, c->ids, c->x[0], 1, c->R, c->T, c->C, c->scale);
    return dot(c->out, c->dout, c->T * c->C);
}
// the backward's list: the distinct ids, and for each the output rows (position % T) that read it, in order
static int64_t embedding_groups(const int32_t *ids, int64_t n, int64_t T, int32_t *uniq, int32_t *start, int32_t *rows) {
    int64_t nu = os_ids_group(ids, n, uniq, start, rows);
    for (int64_t j = 0; j < n; j++) rows[j] %= (int32_t)T;
    return nu;
}
static void bwd_embedding(Case *c, float **g) {
    int32_t uniq[6], start[7], rows[6];
    int64_t nu = embedding_groups(c->ids, c->N, c->T, uniq, start, rows);
    k_embedding_bwd(g[0], uniq, start, rows, c->dout, nu, c->C, c->scale);
}
static const int32_t emb_ids[6] = {3, 0, 3, 4, 1, 3};   // [R = 2, T = 3]; repeated ids: their gradients add up
static void case_embedding(Case *c) {
    *c = (Case){.name = "embedding", .n = 1, .N = 6, .R = 2, .T = 3, .C = 5, .V = 6, .scale = 1.5f, .ids = emb_ids,
                .loss = loss_embedding, .bwd = bwd_embedding};
    c->x[0] = rnd(c->size[0] = 30, 5, -1, 1);
    c->dout = rnd(15, 6, -1, 1);
    c->out = fa(15);
}

static double loss_rmsnorm(Case *c) {
    k_rmsnorm_fwd(c->out, c->s1, c->x[0], NULL, c->x[1], c->N, c->C, c->eps);
    return dot(c->out, c->dout, c->N * c->C);
}
static void bwd_rmsnorm(Case *c, float **g) {
    loss_rmsnorm(c);
    k_rmsnorm_bwd(g[0], g[1], c->dout, c->x[0], c->x[1], c->s1, c->N, c->C);
}
static void case_rmsnorm(Case *c) {
    *c = (Case){.name = "rmsnorm", .n = 2, .N = 4, .C = 9, .eps = 1e-6f, .loss = loss_rmsnorm, .bwd = bwd_rmsnorm};
    c->x[0] = rnd(c->size[0] = 36, 7, -2, 2);
    c->x[1] = rnd(c->size[1] = 9, 8, 0.5f, 1.5f);
    c->dout = rnd(36, 9, -1, 1);
    c->out = fa(36);
    c->s1 = fa(4);
}

static double loss_layernorm(Case *c) {
    k_layernorm_fwd(c->out, c->s1, c->s2, c->x[0], c->x[1], c->x[2], c->N, c->C, c->eps);
    return dot(c->out, c->dout, c->N * c->C);
}
static void bwd_layernorm(Case *c, float **g) {
    loss_layernorm(c);
    k_layernorm_bwd(g[0], g[1], g[2], c->dout, c->x[0], c->s1, c->s2, c->x[1], c->N, c->C);
}
static void case_layernorm(Case *c) {
    *c = (Case){.name = "layernorm", .n = 3, .N = 4, .C = 9, .eps = 1e-5f, .loss = loss_layernorm,
                .bwd = bwd_layernorm};
    c->x[0] = rnd(c->size[0] = 36, 10, -2, 2);
    c->x[1] = rnd(c->size[1] = 9, 11, 0.5f, 1.5f);
    c->x[2] = rnd(c->size[2] = 9, 12, -1, 1);
    c->dout = rnd(36, 13, -1, 1);
    c->out = fa(36);
    c->s1 = fa(4);
    c->s2 = fa(4);
}

// rope: cos/sin tables in s1/s2; the backward overwrites, so the Case copies into the gradient
static double loss_rope(Case *c) {
    int64_t n = c->B * c->T * c->H * c->D;
    memcpy(c->out, c->x[0], (size_t)n * sizeof(float));
    k_rope_fwd(c->out, NULL, c->s1, c->s2, c->B, c->T, c->H, 0, c->D);
    return dot(c->out, c->dout, n);
}
static void bwd_rope(Case *c, float **g) {
    int64_t n = c->B * c->T * c->H * c->D;
    memcpy(c->out, c->dout, (size_t)n * sizeof(float));
    k_rope_bwd(c->out, NULL, c->s1, c->s2, c->B, c->T, c->H, 0, c->D);
    if (g[0]) memcpy(g[0], c->out, (size_t)n * sizeof(float));
}
static const int32_t rope_pos[3] = {0, 7, 1000};
static void case_rope(Case *c) {
    *c = (Case){.name = "rope", .n = 1, .B = 2, .T = 3, .H = 2, .D = 8, .overwrite = 1, .loss = loss_rope,
                .bwd = bwd_rope};
    c->x[0] = rnd(c->size[0] = 96, 14, -1, 1);
    c->dout = rnd(96, 15, -1, 1);
    c->out = fa(96);
    c->s1 = fa(12);
    c->s2 = fa(12);
    k_rope_table(c->s1, c->s2, rope_pos, 3, 8, 10000.0f);
}

// attention: att in s1, dout [B,T,H,D]
static double loss_attention(Case *c) {
    k_attention_fwd(c->out, c->s1, c->x[0], c->x[1], c->x[2], c->mask, c->seg, c->causal, c->B, c->T, c->H, c->KH, c->D);
    return dot(c->out, c->dout, c->B * c->T * c->H * c->D);
}
static void bwd_attention(Case *c, float **g) {
    loss_attention(c);
    k_attention_bwd(g[0], g[1], g[2], c->dout, c->x[0], c->x[1], c->x[2], c->out, c->s1, c->mask, c->seg, c->causal,
                    c->B, c->T, c->H, c->KH, c->D, g_acc);
}
static const uint8_t att_mask[10] = {1, 1, 1, 0, 1, 0, 1, 1, 1, 1};   // [B=2,T=5]: padding in the middle, left
static void case_attention(Case *c, int causal, const uint8_t *mask, int64_t H, int64_t KH) {
    *c = (Case){.name = causal ? "attention causal+keymask GQA" : "attention full MHA", .n = 3, .B = 2, .T = 5,
                .H = H, .KH = KH, .D = 4, .causal = causal, .mask = mask, .has_acc = 1, .loss = loss_attention,
                .bwd = bwd_attention};
    int64_t nq = 2 * 5 * H * 4, nk = 2 * 5 * KH * 4;
    c->x[0] = rnd(c->size[0] = nq, 16, -1.5f, 1.5f);
    c->x[1] = rnd(c->size[1] = nk, 17, -1.5f, 1.5f);
    c->x[2] = rnd(c->size[2] = nk, 18, -1, 1);
    c->dout = rnd(nq, 19, -1, 1);
    c->out = fa(nq);
    c->s1 = fa(2 * H * 25);
}

static double loss_swiglu(Case *c) {
    k_swiglu_fwd(c->out, c->x[0], c->x[1], c->N);
    return dot(c->out, c->dout, c->N);
}
static void bwd_swiglu(Case *c, float **g) { k_swiglu_bwd(g[0], g[1], c->dout, c->x[0], c->x[1], c->N, g_acc); }
static void case_swiglu(Case *c) {
    *c = (Case){.name = "swiglu", .n = 2, .N = 40, .has_acc = 1, .loss = loss_swiglu, .bwd = bwd_swiglu};
    c->x[0] = rnd(c->size[0] = 40, 20, -5, 5);
    c->x[1] = rnd(c->size[1] = 40, 21, -2, 2);
    c->dout = rnd(40, 22, -1, 1);
    c->out = fa(40);
}

static double loss_gelu(Case *c) {
    k_gelu_fwd(c->out, c->x[0], c->N);
    return dot(c->out, c->dout, c->N);
}
static void bwd_gelu(Case *c, float **g) { k_gelu_bwd(g[0], c->dout, c->x[0], c->N); }
static double loss_relu(Case *c) {
    k_relu_fwd(c->out, c->x[0], c->N);
    return dot(c->out, c->dout, c->N);
}
static void bwd_relu(Case *c, float **g) { k_relu_bwd(g[0], c->dout, c->x[0], c->N); }
static void case_unary(Case *c, int gelu) {
    *c = (Case){.name = gelu ? "gelu" : "relu", .n = 1, .N = 40, .loss = gelu ? loss_gelu : loss_relu,
                .bwd = gelu ? bwd_gelu : bwd_relu};
    c->x[0] = rnd(c->size[0] = 40, 23, -4, 4);
    for (int i = 0; i < 40; i++)   // keep relu's kink away from the finite-difference steps
        if (fabsf(c->x[0][i]) < 0.05f) c->x[0][i] = 0.1f;
    c->dout = rnd(40, 24, -1, 1);
    c->out = fa(40);
}

// ---- checks ----
typedef void (*Maker)(Case *);
static void mk_att_causal(Case *c) { case_attention(c, 1, att_mask, 4, 2); }
static void mk_att_full(Case *c) { case_attention(c, 0, NULL, 3, 3); }
static const int32_t att_seg[10] = {0, 0, 1, 1, 1, 4, 4, 7, 7, 7};   // [B=2,T=5]: packed samples
static void mk_att_seg(Case *c) {
    case_attention(c, 1, att_mask, 4, 2);
    c->name = "attention causal+keymask+segments GQA", c->seg = att_seg;
}
static void mk_gelu(Case *c) { case_unary(c, 1); }
static void mk_relu(Case *c) { case_unary(c, 0); }
static const Maker makers[] = {case_linear, case_embedding, case_rmsnorm, case_layernorm, case_rope,
                               mk_att_causal, mk_att_full,  mk_att_seg,   case_swiglu,    mk_gelu,
                               mk_relu};
#define NMAKERS ((int)(sizeof makers / sizeof makers[0]))

static void test_finite_differences(void) {
    for (int m = 0; m < NMAKERS; m++) {
        Case c;
        makers[m](&c);
        check_fd(&c, 1e-2f, 1e-3);
        pool_free();
    }
}

// every *_bwd accumulates: from a random start g0, two calls give g0 + 2 * (one call from zero)
static void test_accumulate(void) {
    double worst = 0;
    const char *bad = "-";
    for (int m = 0; m < NMAKERS; m++) {
        Case c;
        makers[m](&c);
        if (c.overwrite) {
            pool_free();
            continue;
        }
        float *d[3] = {0}, *g[3] = {0}, *g0[3] = {0};
        for (int a = 0; a < c.n; a++) {
            d[a] = fa(c.size[a]);
            g0[a] = rnd(c.size[a], 100 + a, -1, 1);
            g[a] = dup(g0[a], c.size[a]);
        }
        c.bwd(&c, d);
        c.bwd(&c, g);
        c.bwd(&c, g);
        for (int a = 0; a < c.n; a++) {
            double *want = (double *)fa(2 * c.size[a]);
            for (int64_t i = 0; i < c.size[a]; i++) want[i] = g0[a][i] + 2.0 * d[a][i];
            double e = maxrel(g[a], want, c.size[a]);
            if (e > worst) worst = e, bad = c.name;
        }
        pool_free();
    }
    check("backward accumulates (g0 + 2 calls)", worst < 1e-5, "worst %.1e in %s", worst, bad);
}

// acc 0 overwrites the gradients (NaN before: never read) with the bits of accumulating onto zeros (acc 1), each
// gradient alone and all together
static void test_overwrite(void) {
    int ok = 1, n = 0;
    const char *bad = "-";
    for (int m = 0; m < NMAKERS; m++) {
        Case c;
        makers[m](&c);
        for (int sub = 1; c.has_acc && sub < (1 << c.n); sub++) {
            float *z[3] = {0}, *o[3] = {0};
            for (int a = 0; a < c.n; a++) {
                if (!(sub >> a & 1)) continue;
                z[a] = fa(c.size[a]), o[a] = fa(c.size[a]);
                for (int64_t i = 0; i < c.size[a]; i++) z[a][i] = 0.0f, o[a][i] = NAN;
            }
            g_acc = 1, c.bwd(&c, z);
            g_acc = 0, c.bwd(&c, o);
            g_acc = 1, n++;
            for (int a = 0; a < c.n; a++)
                if (z[a] && memcmp(z[a], o[a], sizeof(float) * (size_t)c.size[a])) ok = 0, bad = c.name;
        }
        pool_free();
    }
    check("acc 0 overwrites: the bits of accumulating onto zeros", ok && n > 0, "%d cases, first differing: %s", n, bad);
}

// NULL gradient pointers are skipped and do not change the other gradients
static void test_null_grads(void) {
    int ok = 1;
    const char *bad = "-";
    for (int m = 0; m < NMAKERS; m++) {
        Case c;
        makers[m](&c);
        float *full[3] = {0};
        for (int a = 0; a < c.n; a++) full[a] = fa(c.size[a]);
        c.bwd(&c, full);
        for (int sub = 0; sub < (1 << c.n) - 1; sub++) {   // every proper subset of the gradients
            float *g[3] = {0};
            for (int a = 0; a < c.n; a++)
                if (sub >> a & 1) g[a] = fa(c.size[a]);
            c.bwd(&c, g);
            for (int a = 0; a < c.n; a++)
                if (g[a] && maxrelf(g[a], full[a], c.size[a]) > 1e-6) ok = 0, bad = c.name;
        }
        pool_free();
    }
    check("NULL gradient pointers skipped", ok, "first mismatch in %s", bad);
}

static void test_gemm(void) {
    // c[M,N] = alpha op(a) op(b) + beta c with padded row strides, all four transpose cases
    int64_t M = 5, N = 4, K = 6, ld = 9;
    float *a = rnd(9 * 9, 30, -1, 1), *b = rnd(9 * 9, 31, -1, 1), *c0 = rnd(M * ld, 32, -1, 1);
    double worst = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            float *c = dup(c0, M * ld);
            k_gemm(ta, tb, M, N, K, 0.5f, a, ld, b, ld, 2.0f, c, ld);
            double want[5 * 9];
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < ld; j++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++)
                        s += (double)(ta ? a[k * ld + i] : a[i * ld + k]) * (tb ? b[j * ld + k] : b[k * ld + j]);
                    want[i * ld + j] = j < N ? 0.5 * s + 2.0 * c0[i * ld + j] : c0[i * ld + j];
                }
            worst = fmax(worst, maxrel(c, want, M * ld));
        }
    // K = 0: c = beta c
    float *c = dup(c0, M * ld);
    k_gemm(0, 0, M, N, 0, 1.0f, a, ld, b, ld, 3.0f, c, ld);
    int k0 = c[0] == 3.0f * c0[0] && c[N] == c0[N];
    check("gemm transposes, strides, alpha/beta, K=0", worst < 1e-6 && k0, "max scaled error %.1e, K=0 %s", worst,
          k0 ? "ok" : "wrong");
    pool_free();
}

static void test_linear_fwd(void) {
    Case c;
    case_linear(&c);
    double want[30];
    double worst = 0;
    for (int bias = 0; bias < 2; bias++) {
        k_linear_fwd(c.out, c.x[0], c.x[1], bias ? c.x[2] : NULL, c.N, c.I, c.O);
        for (int64_t n = 0; n < c.N; n++)
            for (int64_t o = 0; o < c.O; o++) {
                double s = bias ? c.x[2][o] : 0;
                for (int64_t i = 0; i < c.I; i++) s += (double)c.x[0][n * c.I + i] * c.x[1][o * c.I + i];
                want[n * c.O + o] = s;
            }
        worst = fmax(worst, maxrel(c.out, want, 30));
    }
    check("linear forward (with and without bias)", worst < 1e-6, "max scaled error %.1e", worst);
    pool_free();
}

static void test_embedding_fwd(void) {
    Case c;
    case_embedding(&c);
    k_embedding_fwd(c.out, c.ids, c.x[0], 1, c.R, c.T, c.C, c.scale);
    double w[15] = {0};
    for (int64_t r = 0; r < c.R; r++)
        for (int64_t t = 0; t < c.T; t++)
            for (int64_t j = 0; j < c.C; j++) w[t * c.C + j] += (double)c.scale * c.x[0][c.ids[r * c.T + t] * c.C + j];
    double e = maxrel(c.out, w, 15);
    check("embedding forward (the sum of the R rows)", e < 1e-6, "max scaled error %.1e", e);
    pool_free();
}

// the backward grouped by table row adds each element's terms in the positions' order: the same bits as the plain
// loop over the positions (ids repeated often)
static void test_embedding_bwd_order(void) {
    enum { N = 700, C = 130, V = 50 };   // C: 3 column blocks
    int32_t *ids = (int32_t *)fa(N), *uniq = (int32_t *)fa(N), *start = (int32_t *)fa(N + 1), *rows = (int32_t *)fa(N);
    for (int64_t n = 0; n < N; n++) ids[n] = n % 3 == 0 ? 1 : (int32_t)((n * n + 3) % V);
    float *dout = rnd(N * C, 21, -1, 1), *want = rnd(V * C, 22, -1, 1), *got = dup(want, V * C);
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < C; j++) want[ids[n] * C + j] += 0.75f * dout[n * C + j];
    int64_t nu = embedding_groups(ids, N, N, uniq, start, rows);
    k_embedding_bwd(got, uniq, start, rows, dout, nu, C, 0.75f);
    check("embedding backward grouped by table row: the positions' order", memcmp(got, want, sizeof(float) * V * C) == 0,
          "bitwise against the loop over the positions (N %d, C %d)", N, C);
    pool_free();
}

// rmsnorm and layernorm forwards against their formulas in double
static void test_norm_fwd(void) {
    Case r, l;
    case_rmsnorm(&r);
    case_layernorm(&l);
    loss_rmsnorm(&r);
    loss_layernorm(&l);
    double wr[36], wl[36];
    for (int64_t n = 0; n < 4; n++) {
        const float *x = r.x[0] + n * 9, *y = l.x[0] + n * 9;
        double ss = 0, m = 0, v = 0;
        for (int j = 0; j < 9; j++) ss += (double)x[j] * x[j], m += y[j] / 9.0;
        for (int j = 0; j < 9; j++) v += (y[j] - m) * (y[j] - m) / 9.0;
        for (int j = 0; j < 9; j++) {
            wr[n * 9 + j] = x[j] / sqrt(ss / 9 + 1e-6) * r.x[1][j];
            wl[n * 9 + j] = (y[j] - m) / sqrt(v + 1e-5) * l.x[1][j] + l.x[2][j];
        }
    }
    double er = maxrel(r.out, wr, 36), el = maxrel(l.out, wl, 36);
    check("rmsnorm and layernorm forward", er < 1e-6 && el < 1e-6, "rmsnorm %.1e, layernorm %.1e", er, el);
    // with a residual: x + res written to x and its norm, the bits of k_add then the norm
    float *res = rnd(36, 30, -1, 1), *x1 = dup(r.x[0], 36), *x2 = dup(r.x[0], 36), *o1 = fa(36), *o2 = fa(36);
    float *s1 = fa(4), *s2 = fa(4);
    k_rmsnorm_fwd(o1, s1, x1, res, r.x[1], 4, 9, r.eps);
    k_add(x2, x2, res, 36);
    k_rmsnorm_fwd(o2, s2, x2, NULL, r.x[1], 4, 9, r.eps);
    check("rmsnorm with a residual: the bits of add then rmsnorm",
          !memcmp(x1, x2, 36 * sizeof(float)) && !memcmp(o1, o2, 36 * sizeof(float)) && !memcmp(s1, s2, 4 * sizeof(float)) &&
              memcmp(x1, r.x[0], 36 * sizeof(float)), "sum, out and rstd");
    pool_free();
}

// table as HF computes it in float32; rotation keeps pair norms; bwd(fwd(x)) = x
static void test_rope(void) {
    Case c;
    case_rope(&c);
    int tab_ok = 1;
    for (int t = 0; t < 3; t++)
        for (int j = 0; j < 4; j++) {
            float inv = 1.0f / powf(10000.0f, (float)(2 * j) / 8.0f), ang = (float)rope_pos[t] * inv;
            tab_ok &= c.s1[t * 4 + j] == cosf(ang) && c.s2[t * 4 + j] == sinf(ang);
        }
    tab_ok &= c.s1[0] == 1.0f && c.s2[0] == 0.0f;   // position 0: identity
    float *y = dup(c.x[0], 96);
    k_rope_fwd(y, NULL, c.s1, c.s2, 2, 3, 2, 0, 8);
    double en = 0, ei = 0;
    for (int r = 0; r < 12; r++)
        for (int j = 0; j < 4; j++) {
            const float *a = c.x[0] + r * 8, *b = y + r * 8;
            en = fmax(en, fabs(hypot(a[j], a[j + 4]) - hypot(b[j], b[j + 4])));
        }
    // position 0 rows unchanged, position 7 rows changed
    int p0 = !memcmp(y, c.x[0], 16 * sizeof(float)) && memcmp(y + 16, c.x[0] + 16, 16 * sizeof(float));
    k_rope_bwd(y, NULL, c.s1, c.s2, 2, 3, 2, 0, 8);
    for (int i = 0; i < 96; i++) ei = fmax(ei, fabs(y[i] - c.x[0][i]));
    // q [2,3,2,8] and k [2,3,1,8] in one call: the bits of a call for each
    int qk = 1;
    for (int bwd = 0; bwd < 2; bwd++) {
        float *q1 = dup(c.x[0], 96), *k1 = dup(c.dout, 48), *q2 = dup(c.x[0], 96), *k2 = dup(c.dout, 48);
        void (*f)(float *, float *, const float *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t) =
            bwd ? k_rope_bwd : k_rope_fwd;
        f(q1, k1, c.s1, c.s2, 2, 3, 2, 1, 8);
        f(q2, NULL, c.s1, c.s2, 2, 3, 2, 0, 8);
        f(k2, NULL, c.s1, c.s2, 2, 3, 1, 0, 8);
        qk &= !memcmp(q1, q2, 96 * sizeof(float)) && !memcmp(k1, k2, 48 * sizeof(float)) && memcmp(k1, c.dout, 48 * sizeof(float));
    }
    check("rope of q and k in one call: the bits of one call each", qk, "forward and backward");
    check("rope table (float32 HF formula), norm kept, inverse", tab_ok && en < 1e-6 && ei < 1e-6 && p0,
          "table %s, norm change %.1e, bwd(fwd(x))-x %.1e, pos0 identity %s", tab_ok ? "exact" : "WRONG", en, ei,
          p0 ? "yes" : "no");
    pool_free();
}

// attention forward against a direct double implementation (mask, causal, GQA)
static void attention_ref(double *out, double *att, const Case *c) {
    int64_t T = c->T, H = c->H, KH = c->KH, D = c->D, R = H / KH;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                double s[16], mx = -INFINITY, sum = 0;
                const float *q = c->x[0] + ((b * T + t) * H + h) * D;
                for (int64_t u = 0; u < T; u++) {
                    int ok = (!c->mask || c->mask[b * T + u]) && (!c->causal || u <= t) &&
                             (!c->seg || c->seg[b * T + u] == c->seg[b * T + t]);
                    const float *k = c->x[1] + ((b * T + u) * KH + h / R) * D;
                    s[u] = ok ? dot(q, k, D) / sqrt((double)D) : -INFINITY;
                    mx = fmax(mx, s[u]);
                }
                for (int64_t u = 0; u < T; u++) sum += s[u] = mx == -INFINITY ? 0 : exp(s[u] - mx);
                double *o = out + ((b * T + t) * H + h) * D;
                for (int64_t d = 0; d < D; d++) o[d] = 0;
                for (int64_t u = 0; u < T; u++) {
                    double p = sum > 0 ? s[u] / sum : 0;
                    att[((b * H + h) * T + t) * T + u] = p;
                    for (int64_t d = 0; d < D; d++) o[d] += p * c->x[2][((b * T + u) * KH + h / R) * D + d];
                }
            }
}

static void test_attention_fwd(void) {
    double worst = 0;
    for (int m = 0; m < 3; m++) {
        Case c;
        m == 2 ? mk_att_seg(&c) : m ? mk_att_full(&c) : mk_att_causal(&c);
        loss_attention(&c);
        int64_t no = c.size[0], na = c.B * c.H * c.T * c.T;
        double *out = (double *)fa(2 * no), *att = (double *)fa(2 * na);
        attention_ref(out, att, &c);
        worst = fmax(worst, fmax(maxrel(c.out, out, no), maxrel(c.s1, att, na)));
        pool_free();
    }
    check("attention forward (causal+keymask+GQA, full MHA, segments) vs direct", worst < 1e-6, "max scaled error %.1e", worst);
}

// a query row with no allowed key: zero probabilities, zero output, finite gradients
static void test_attention_masked_row(void) {
    static const uint8_t mask[10] = {0, 1, 1, 1, 1, 0, 0, 0, 0, 0};   // b=0 left padding, b=1 all padding
    Case c;
    case_attention(&c, 1, mask, 4, 2);
    float *g[3] = {fa(c.size[0]), fa(c.size[1]), fa(c.size[2])};
    bwd_attention(&c, g);
    int64_t T = 5, H = 4, D = 4;
    int zero = 1;
    for (int64_t h = 0; h < H; h++) {
        for (int64_t d = 0; d < D; d++) zero &= c.out[h * D + d] == 0.0f;   // b=0, t=0
        for (int64_t u = 0; u < T; u++) zero &= c.s1[(h * T + 0) * T + u] == 0.0f;
    }
    for (int64_t i = T * H * D; i < 2 * T * H * D; i++) zero &= c.out[i] == 0.0f;   // b=1 entirely
    int fin = allfinite(c.out, c.size[0]) && allfinite(c.s1, 2 * H * T * T) && allfinite(g[0], c.size[0]) &&
              allfinite(g[1], c.size[1]) && allfinite(g[2], c.size[2]);
    int live = c.out[1 * H * D] != 0.0f;   // b=0, t=1, h=0 sees key 1: non-zero output
    check("attention fully masked query rows", zero && fin && live, "zero rows %s, finite %s, others live %s",
          zero ? "yes" : "NO", fin ? "yes" : "NO", live ? "yes" : "NO");
    pool_free();
}

// invariant: one row packing three segments (longer than a block of K_ATTN_BQ query rows, so blocks skip the keys
// of earlier segments) gives each segment's outputs and gradients as the segment run alone as its own row
static void test_attention_segments_separate(void) {
    enum { T = 300, H = 2, KH = 1, D = 8, NS = 3 };
    static const int64_t start[NS + 1] = {0, 100, 140, T};
    int32_t seg[T];
    for (int i = 0; i < NS; i++)
        for (int64_t t = start[i]; t < start[i + 1]; t++) seg[t] = 10 * i + 3;
    float *q = rnd(T * H * D, 60, -2, 2), *k = rnd(T * KH * D, 61, -2, 2), *v = rnd(T * KH * D, 62, -1, 1);
    float *dout = rnd(T * H * D, 63, -1, 1), *out = fa(T * H * D), *att = fa(k_attention_stats_floats(1, T, H));
    float *dq = fa(T * H * D), *dk = fa(T * KH * D), *dv = fa(T * KH * D);
    memset(dq, 0, sizeof(float) * T * H * D), memset(dk, 0, sizeof(float) * T * KH * D);
    memset(dv, 0, sizeof(float) * T * KH * D);
    k_attention_fwd(out, att, q, k, v, NULL, seg, 1, 1, T, H, KH, D);
    k_attention_bwd(dq, dk, dv, dout, q, k, v, out, att, NULL, seg, 1, 1, T, H, KH, D, 1);
    double worst = 0;
    for (int i = 0; i < NS; i++) {
        int64_t s0 = start[i], n = start[i + 1] - s0;
        float *o1 = fa(n * H * D), *a1 = fa(k_attention_stats_floats(1, n, H));
        float *g[3] = {fa(n * H * D), fa(n * KH * D), fa(n * KH * D)};
        memset(g[0], 0, sizeof(float) * (size_t)(n * H * D)), memset(g[1], 0, sizeof(float) * (size_t)(n * KH * D));
        memset(g[2], 0, sizeof(float) * (size_t)(n * KH * D));
        const float *qi = q + s0 * H * D, *ki = k + s0 * KH * D, *vi = v + s0 * KH * D;
        k_attention_fwd(o1, a1, qi, ki, vi, NULL, NULL, 1, 1, n, H, KH, D);
        k_attention_bwd(g[0], g[1], g[2], dout + s0 * H * D, qi, ki, vi, o1, a1, NULL, NULL, 1, 1, n, H, KH, D, 1);
        worst = fmax(worst, maxrelf(out + s0 * H * D, o1, n * H * D));
        worst = fmax(worst, maxrelf(dq + s0 * H * D, g[0], n * H * D));
        worst = fmax(worst, maxrelf(dk + s0 * KH * D, g[1], n * KH * D));
        worst = fmax(worst, maxrelf(dv + s0 * KH * D, g[2], n * KH * D));
        for (int64_t h = 0; h < H; h++)   // no probability crosses into another segment
            for (int64_t t = s0; t < s0 + n; t++)
                for (int64_t u = 0; u < T; u++)
                    if ((u < s0 || u >= s0 + n) && att[(h * T + t) * T + u] != 0.0f) worst = INFINITY;
    }
    check("attention segments of one row = each segment run alone (out, dq, dk, dv)", worst < 1e-5,
          "max scaled error %.1e", worst);
    pool_free();
}

static void test_activation_fwd(void) {
    float *x = rnd(64, 50, -6, 6), *u = rnd(64, 51, -2, 2), *o = fa(64), *ip = dup(x, 64);
    double ws[64], wg[64], wr[64];
    for (int i = 0; i < 64; i++) {
        ws[i] = x[i] / (1 + exp(-(double)x[i])) * u[i];
        wg[i] = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2.0)));
        wr[i] = x[i] > 0 ? x[i] : 0;
    }
    k_swiglu_fwd(o, x, u, 64);
    double es = maxrel(o, ws, 64);
    k_gelu_fwd(ip, ip, 64);   // in place
    double eg = maxrel(ip, wg, 64);
    memcpy(ip, x, 64 * sizeof(float));
    k_relu_fwd(ip, ip, 64);
    double er = maxrel(ip, wr, 64);
    check("swiglu, gelu (in place), relu (in place) forward", es < 1e-6 && eg < 1e-6 && er == 0,
          "swiglu %.1e, gelu %.1e, relu %.1e", es, eg, er);
    pool_free();
}

static void test_conv1d(void) {
    static const int64_t cfg[3][5] = {{3, 11, 2, 1, 3}, {2, 8, 1, 1, 3}, {4, 7, 1, 0, 1}};   // Cin Tin stride pad K
    double worst = 0;
    for (int v = 0; v < 3; v++) {
        int64_t Cin = cfg[v][0], Tin = cfg[v][1], st = cfg[v][2], pad = cfg[v][3], K = cfg[v][4], Cout = 5;
        int64_t Tout = (Tin + 2 * pad - K) / st + 1;
        float *x = rnd(Cin * Tin, 60, -1, 1), *w = rnd(Cout * Cin * K, 61, -1, 1), *b = rnd(Cout, 62, -1, 1);
        float *out = fa(Cout * Tout);
        const float *bias = v == 1 ? NULL : b;
        k_conv1d_fwd(out, x, w, bias, Cin, Tin, Cout, K, st, pad);
        double want[5 * 16];
        for (int64_t o = 0; o < Cout; o++)
            for (int64_t t = 0; t < Tout; t++) {
                double s = bias ? bias[o] : 0;
                for (int64_t i = 0; i < Cin; i++)
                    for (int64_t k = 0; k < K; k++) {
                        int64_t p = st * t + k - pad;
                        if (p >= 0 && p < Tin) s += (double)w[(o * Cin + i) * K + k] * x[i * Tin + p];
                    }
                want[o * Tout + t] = s;
            }
        worst = fmax(worst, maxrel(out, want, Cout * Tout));
        pool_free();
    }
    check("conv1d (stride 2 pad 1; stride 1 pad 1 no bias; K=1) vs direct", worst < 1e-6, "max scaled error %.1e",
          worst);
}

// cross-entropy: loss vs double formula, gradient vs finite differences of the loss, ignored rows, ld > V
static double xent_loss_of(const float *logits, int64_t N, int64_t ld, int64_t V, const int32_t *lab, float *tmp) {
    memcpy(tmp, logits, (size_t)(N * ld) * sizeof(float));
    return k_xent_fwd_bwd(tmp, ld, lab, N, V, 1.0f, NULL);
}
static void test_xent(void) {
    enum { N = 6, V = 7, LD = 9 };
    static const int32_t lab[N] = {2, -100, 0, 6, -100, 5};
    float *x = rnd(N * LD, 70, -3, 3), *tmp = fa(N * LD);
    x[5 * LD + 5] = 80.0f, x[5 * LD + 1] = 79.0f;   // large logits: no overflow; row 5 argmax == label
    x[3 * LD + 6] = 5.0f;                            // row 3 argmax == label
    x[0 * LD + 2] = x[0 * LD + 4] = 6.0f;            // row 0: tied maximum, the first (the label) counts
    for (int n = 0; n < N; n++) x[n * LD + 7] = x[n * LD + 8] = 12345.0f;   // padding beyond V
    float *g = dup(x, N * LD);
    int64_t nc = 5;
    float dscale = 0.25f;
    double loss = k_xent_fwd_bwd(g, LD, lab, N, V, dscale, &nc);
    double want = 0, gref[N * V];
    int64_t ncw = 5;
    for (int n = 0; n < N; n++) {
        const float *r = x + n * LD;
        double mx = -INFINITY, s = 0;
        int arg = 0;
        for (int i = 0; i < V; i++) {
            if (r[i] > r[arg]) arg = i;
            mx = fmax(mx, r[i]);
        }
        for (int i = 0; i < V; i++) s += exp(r[i] - mx);
        for (int i = 0; i < V; i++)
            gref[n * V + i] = lab[n] < 0 ? 0 : dscale * (exp(r[i] - mx) / s - (i == lab[n]));
        if (lab[n] >= 0) want += mx + log(s) - r[lab[n]], ncw += arg == lab[n];
    }
    float gv[N * V];
    for (int n = 0; n < N; n++) memcpy(gv + n * V, g + n * LD, V * sizeof(float));
    double eg = maxrel(gv, gref, N * V);
    // finite differences of the returned loss (scaled by dscale) against the written gradient
    double fd[N * V];
    const float h = 1e-2f;
    for (int i = 0; i < N * V; i++) {
        float *p = x + (i / V) * LD + i % V, x0 = *p, xp = x0 + h, xm = x0 - h;
        *p = xp;
        double lp = xent_loss_of(x, N, LD, V, lab, tmp);
        *p = xm;
        double lm = xent_loss_of(x, N, LD, V, lab, tmp);
        *p = x0;
        fd[i] = dscale * (lp - lm) / ((double)xp - (double)xm);
    }
    double ef = maxrel(gv, fd, N * V);
    int pad = 1, ign = 1;
    for (int n = 0; n < N; n++) {
        pad &= g[n * LD + 7] == 12345.0f && g[n * LD + 8] == 12345.0f;
        if (lab[n] < 0)
            for (int i = 0; i < V; i++) ign &= g[n * LD + i] == 0.0f;
    }
    double el = fabs(loss - want) / want;
    check("xent loss, gradient (formula and finite differences), ignored rows, ld > V, ncorrect",
          el < 1e-6 && eg < 1e-6 && ef < 2e-3 && pad && ign && nc == ncw && ncw >= 8,
          "loss %.1e, grad %.1e, fd %.1e, padding %s, ignored rows %s, ncorrect %lld (want %lld)", el, eg, ef,
          pad ? "kept" : "CHANGED", ign ? "zero" : "NONZERO", (long long)nc, (long long)ncw);
    pool_free();
}

// the logits chunk's rows: 2^25 / V (at least 64, at most N), or the caller's forced count (at most N); no state
// kept between calls (a forced count once does not stay)
static void test_xent_chunk_rows(void) {
    int64_t d = k_xent_chunk_rows(156160, 100000, 0), small = k_xent_chunk_rows(1 << 20, 1000, 0);
    int64_t f = k_xent_chunk_rows(156160, 100000, 8), cap = k_xent_chunk_rows(64, 5, 8);
    int64_t again = k_xent_chunk_rows(156160, 100000, 0);
    check("xent chunk rows from V, forced, capped at N, stateless",
          d == 214 && small == 64 && f == 8 && cap == 5 && again == 214,
          "default %lld (want 214), floor %lld (64), forced %lld (8), capped %lld (5), after forced %lld (214)",
          (long long)d, (long long)small, (long long)f, (long long)cap, (long long)again);
}

static void test_elementwise(void) {
    enum { N = 1000 };
    float *a = rnd(N, 80, -1, 1), *b = rnd(N, 81, -1, 1), *o = dup(a, N);
    k_add(o, o, b, N);   // aliasing out == a
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= o[i] == a[i] + b[i];
    k_axpy(o, -2.0f, b, N);
    for (int i = 0; i < N; i++) ok &= fabsf(o[i] - (a[i] - b[i])) < 1e-6f;
    k_scale(o, 0.5f, N);
    for (int i = 0; i < N; i++) ok &= fabsf(o[i] - 0.5f * (a[i] - b[i])) < 1e-6f;
    double s = k_sumsq(a, N), w = dot(a, a, N);
    ok &= fabs(s - w) <= 1e-12 * w;
    check("add (aliased), axpy, scale, sumsq", ok, "sumsq %.9g vs %.9g", s, w);
    pool_free();
}

// every kernel accepts zero sizes without touching memory
static void test_zero_sizes(void) {
    float *p = fa(4);
    int32_t id = 0;
    uint8_t m = 1;
    k_gemm(0, 0, 0, 0, 0, 1, p, 1, p, 1, 0, p, 1);
    k_linear_fwd(p, p, p, p, 0, 3, 2);
    k_linear_fwd(p, p, p, NULL, 2, 0, 2);   // I = 0: out = 0
    k_linear_bwd(p, p, p, p, p, p, 0, 0, 0);
    k_embedding_fwd(p, &id, p, 0, 1, 0, 4, 1);
    k_embedding_bwd(p, &id, &id, &id, p, 0, 4, 1);
    k_rmsnorm_fwd(p, p, p, p, p, 0, 4, 1e-6f);
    k_rmsnorm_bwd(p, p, p, p, p, p, 0, 4);
    k_layernorm_fwd(p, p, p, p, p, p, 0, 4, 1e-5f);
    k_layernorm_bwd(p, p, p, p, p, p, p, p, 0, 4);
    k_rope_table(p, p, &id, 0, 4, 1e4f);
    k_rope_fwd(p, p, p, p, 0, 0, 0, 0, 4);
    k_rope_bwd(p, p, p, p, 0, 0, 0, 0, 4);
    k_attention_fwd(p, p, p, p, p, &m, NULL, 1, 0, 0, 1, 1, 4);
    k_attention_bwd(p, p, p, p, p, p, p, p, p, &m, NULL, 1, 0, 0, 1, 1, 4, 0);
    k_swiglu_fwd(p, p, p, 0);
    k_swiglu_bwd(p, p, p, p, p, 0, 0);
    k_gelu_fwd(p, p, 0);
    k_gelu_bwd(p, p, p, 0);
    k_relu_fwd(p, p, 0);
    k_relu_bwd(p, p, p, 0);
    k_conv1d_fwd(p, p, p, p, 0, 0, 0, 3, 1, 0);
    double l = k_xent_fwd_bwd(p, 4, &id, 0, 4, 1, NULL);
    k_add(p, p, p, 0);
    k_axpy(p, 1, p, 0);
    k_scale(p, 1, 0);
    double s = k_sumsq(p, 0);
    check("zero sizes", l == 0 && s == 0, "xent %g, sumsq %g", l, s);
    pool_free();
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        printf("usage: test_kernels   (no arguments; runs every kernel check)\n");
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_gemm();
    test_linear_fwd();
    test_embedding_fwd();
    test_embedding_bwd_order();
    test_norm_fwd();
    test_rope();
    test_attention_fwd();
    test_attention_masked_row();
    test_attention_segments_separate();
    test_activation_fwd();
    test_conv1d();
    test_xent();
    test_xent_chunk_rows();
    test_elementwise();
    test_finite_differences();
    test_accumulate();
    test_overwrite();
    test_null_grads();
    test_zero_sizes();
    printf("kernels: %d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
