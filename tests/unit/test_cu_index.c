// The CUDA kernels' index arithmetic (src/cuda/cu_index.h) on the CPU, against the CPU kernels: each test walks the
// data exactly as the CUDA kernel's blocks do (the same tiles, rows per block and masks, in plain loops)
// and compares with the k_ kernel of the same op. A tile range that drops a key, a row mapped to the wrong head or
// block fails here without a GPU. (The arithmetic inside the tiles, in fp32 with
// another order, is compared on the GPU by tools/device-check.sh.)
#include "check.h"
#include "cuda/cu_index.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *randv(int64_t n, unsigned seed) {
    float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = frand(&seed);
    return x;
}

static double max_diff(const float *a, const float *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

// ---- attention: the kernels' walk (cu_attention.cu) in double ----
typedef struct {
    const float *q, *k, *v;   // q [B,Tq,H,D], k/v [B,S,KH,D]
    const uint8_t *km;
    const int32_t *seg;
    int64_t B, Tq, Tk, S, H, KH, D, off;
    int causal;
} Att;

static int allowed(const Att *a, int64_t b, int64_t t, int64_t s) {
    if (t >= a->Tq || s >= a->Tk) return 0;
    return cu_att_allowed(t, s, a->off, a->causal, a->km ? a->km + b * a->S : NULL, a->seg ? a->seg + b * a->S : NULL);
}

static double score(const Att *a, int64_t b, int64_t t, int64_t h, int64_t s) {
    const float *q = a->q + cu_att_row(b, t, h, a->Tq, a->H, a->D);
    const float *k = a->k + cu_att_row(b, s, cu_att_kv_head(h, a->H, a->KH), a->S, a->KH, a->D);
    double x = 0.0;
    for (int64_t d = 0; d < a->D; d++) x += (double)q[d] * k[d];
    return x / sqrt((double)a->D);
}

// the query rows as the forward and dQ kernels take them: blocks of CU_ATT_BQ rows of (b, h), each row over the keys
// [0, kend) of its block (cu_att_key_end; the kernels walk them in tiles of CU_ATT_BK)
typedef void row_fn(const Att *a, int64_t b, int64_t h, int64_t t, int64_t kend, void *ctx);
static void query_rows(const Att *a, row_fn *row, void *ctx) {
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++)
            for (int64_t t0 = 0; t0 < a->Tq; t0 += CU_ATT_BQ) {
                int64_t n = a->Tq - t0 < CU_ATT_BQ ? a->Tq - t0 : CU_ATT_BQ;
                int64_t kend = cu_att_key_end(t0, n, a->off, a->causal, a->Tk);
                for (int64_t t = t0; t < t0 + n; t++) row(a, b, h, t, kend, ctx);
            }
}

typedef struct {
    float *out, *lse;   // forward: out [B,Tq,H,D], lse [B,H,Tq] (may be NULL)
    float *dq;          // dQ: dq [B,Tq,H,D] (accumulated) from dout and the forward's out and lse
    const float *dout, *fout, *flse;
} Emu;

// attention_fwd_kernel's row: the online softmax over the allowed keys, the row's output and log-sum-exp
static void fwd_row(const Att *a, int64_t b, int64_t h, int64_t t, int64_t kend, void *ctx) {
    Emu *e = ctx;
    int64_t D = a->D;
    double m = -INFINITY, l = 0.0, o[256] = {0};
    for (int64_t s = 0; s < kend; s++) {
        if (!allowed(a, b, t, s)) continue;
        double x = score(a, b, t, h, s), mn = fmax(m, x), al = exp(m - mn), p = exp(x - mn);
        const float *v = a->v + cu_att_row(b, s, cu_att_kv_head(h, a->H, a->KH), a->S, a->KH, D);
        l = l * al + p;
        for (int64_t d = 0; d < D; d++) o[d] = o[d] * al + p * v[d];
        m = mn;
    }
    float *ob = e->out + cu_att_row(b, t, h, a->Tq, a->H, D);
    for (int64_t d = 0; d < D; d++) ob[d] = m == -INFINITY ? 0.0f : (float)(o[d] / l);
    if (e->lse) e->lse[cu_att_stat(b, h, t, a->H, a->Tq)] = m == -INFINITY ? -INFINITY : (float)(m + log(l));
}

static void emu_fwd(const Att *a, float *out, float *lse) {
    Emu e = {.out = out, .lse = lse};
    query_rows(a, fwd_row, &e);
}

// P and dS of (t, s) from the saved lse, Drow = dO[t] . out[t]
static void p_ds(const Att *a, const float *dout, const float *out, const float *lse, int64_t b, int64_t h,
                 int64_t t, int64_t s, double *p, double *ds) {
    *p = *ds = 0.0;
    float L = lse[cu_att_stat(b, h, t, a->H, a->Tq)];
    if (!allowed(a, b, t, s) || L == -INFINITY) return;
    const float *dO = dout + cu_att_row(b, t, h, a->Tq, a->H, a->D), *O = out + cu_att_row(b, t, h, a->Tq, a->H, a->D);
    const float *v = a->v + cu_att_row(b, s, cu_att_kv_head(h, a->H, a->KH), a->S, a->KH, a->D);
    double dp = 0.0, drow = 0.0;
    for (int64_t d = 0; d < a->D; d++) dp += (double)dO[d] * v[d], drow += (double)dO[d] * O[d];
    *p = exp(score(a, b, t, h, s) - L);
    *ds = *p * (dp - drow);
}

// attention_dq_kernel's row: dq[t] += scale sum_s dS[t,s] k[s]
static void dq_row(const Att *a, int64_t b, int64_t h, int64_t t, int64_t kend, void *ctx) {
    Emu *e = ctx;
    double p, ds, sc = 1.0 / sqrt((double)a->D);
    float *dqr = e->dq + cu_att_row(b, t, h, a->Tq, a->H, a->D);
    for (int64_t s = 0; s < kend; s++) {
        p_ds(a, e->dout, e->fout, e->flse, b, h, t, s, &p, &ds);
        const float *k = a->k + cu_att_row(b, s, cu_att_kv_head(h, a->H, a->KH), a->S, a->KH, a->D);
        for (int64_t d = 0; d < a->D; d++) dqr[d] += (float)(sc * ds * k[d]);
    }
}

// attention_dkv_kernel (key tiles of (b, h), query rows from cu_att_query_begin; the kv head's H/KH heads then
// summed) and the dQ rows; dq/dk/dv accumulate
static void emu_bwd(const Att *a, float *dq, float *dk, float *dv, const float *dout, const float *out,
                    const float *lse) {
    int64_t D = a->D, R = a->H / a->KH;
    double p, ds, sc = 1.0 / sqrt((double)D);
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t g = 0; g < a->KH; g++)
            for (int64_t s0 = 0; s0 < a->Tk; s0 += CU_ATT_BK)
                for (int64_t s = s0; s < s0 + CU_ATT_BK && s < a->Tk; s++) {
                    float *dkr = dk + cu_att_row(b, s, g, a->S, a->KH, D), *dvr = dv + cu_att_row(b, s, g, a->S, a->KH, D);
                    for (int64_t h = g * R; h < (g + 1) * R; h++)
                        for (int64_t t = cu_att_query_begin(s0, a->off, a->causal); t < a->Tq; t++) {
                            p_ds(a, dout, out, lse, b, h, t, s, &p, &ds);
                            const float *q = a->q + cu_att_row(b, t, h, a->Tq, a->H, D);
                            const float *dO = dout + cu_att_row(b, t, h, a->Tq, a->H, D);
                            for (int64_t d = 0; d < D; d++) dvr[d] += (float)(p * dO[d]), dkr[d] += (float)(sc * ds * q[d]);
                        }
                }
    Emu e = {.dq = dq, .dout = dout, .fout = out, .flse = lse};
    query_rows(a, dq_row, &e);
}

// one training shape: forward and backward walks against k_attention_fwd/bwd
static void attention_case(int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D, int causal, int mask, int segs) {
    int64_t nq = B * T * H * D, nk = B * T * KH * D;
    uint8_t *km = NULL;
    int32_t *seg = NULL;
    if (mask) {   // the last T/4 keys of batch row 1 and key 2 of row 0 are padding
        km = malloc((size_t)(B * T));
        for (int64_t i = 0; i < B * T; i++) km[i] = !((i >= T && i >= B * T - T / 4) || i == 2);
    }
    if (segs) {   // three segments per row, at T/3 and 2T/3 (row b shifted by b)
        seg = malloc(sizeof(int32_t) * (size_t)(B * T));
        for (int64_t i = 0; i < B * T; i++) seg[i] = (int32_t)(3 * ((i % T) + i / T) / (T + 1));
    }
    Att a = {randv(nq, 1), randv(nk, 2), randv(nk, 3), km, seg, B, T, T, T, H, KH, D, 0, causal};
    float *out = calloc((size_t)nq, 4), *ref = calloc((size_t)nq, 4), *lse = calloc((size_t)(B * H * T), 4);
    float *att = calloc((size_t)k_attention_stats_floats(B, T, H), 4), *dout = randv(nq, 4);
    k_attention_fwd(ref, att, a.q, a.k, a.v, km, seg, causal, B, T, H, KH, D);
    emu_fwd(&a, out, lse);
    double e = max_diff(out, ref, nq);
    CHECK(e < 1e-5, "attention fwd B%lld T%lld H%lld/%lld D%lld causal %d mask %d seg %d: max |diff| %g", (long long)B,
          (long long)T, (long long)H, (long long)KH, (long long)D, causal, mask, segs, e);
    float *g[6];
    for (int i = 0; i < 6; i++) g[i] = calloc((size_t)(i % 3 == 0 ? nq : nk), 4);
    k_attention_bwd(g[0], g[1], g[2], dout, a.q, a.k, a.v, ref, att, km, seg, causal, B, T, H, KH, D, 1);
    emu_bwd(&a, g[3], g[4], g[5], dout, out, lse);
    for (int i = 0; i < 3; i++) {
        e = max_diff(g[i], g[i + 3], i == 0 ? nq : nk);
        CHECK(e < 1e-4, "attention bwd %s B%lld T%lld H%lld/%lld causal %d mask %d seg %d: max |diff| %g",
              (const char *[]){"dq", "dk", "dv"}[i], (long long)B, (long long)T, (long long)H, (long long)KH,
              causal, mask, segs, e);
    }
    for (int i = 0; i < 6; i++) free(g[i]);
    free((void *)a.q), free((void *)a.k), free((void *)a.v), free(out), free(ref), free(lse), free(att), free(dout);
    free(km), free(seg);
}

// the KV-cached forward: keys 0..p0+t of a cache of S positions
static void cached_case(int64_t B, int64_t T, int64_t p0, int64_t S, int64_t H, int64_t KH, int64_t D) {
    int64_t nq = B * T * H * D, nk = B * S * KH * D;
    Att a = {randv(nq, 5), randv(nk, 6), randv(nk, 7), NULL, NULL, B, T, p0 + T, S, H, KH, D, p0, 1};
    float *out = calloc((size_t)nq, 4), *ref = calloc((size_t)nq, 4);
    k_attention_cached_fwd(ref, a.q, a.k, a.v, B, T, p0, S, H, KH, D);
    emu_fwd(&a, out, NULL);
    double e = max_diff(out, ref, nq);
    CHECK(e < 1e-5, "cached attention B%lld T%lld p0 %lld S%lld: max |diff| %g", (long long)B, (long long)T,
          (long long)p0, (long long)S, e);
    free((void *)a.q), free((void *)a.k), free((void *)a.v), free(out), free(ref);
}

static void test_attention(void) {
    CHECK(cu_att_query_begin(64, 0, 1) == 64 && cu_att_query_begin(40, 0, 1) == 32 && cu_att_query_begin(40, 0, 0) == 0 &&
              cu_att_query_begin(40, 50, 1) == 0,
          "cu_att_query_begin: the query tile holding the first row that sees the key tile");
    CHECK(cu_att_key_end(32, 32, 0, 1, 100) == 64 && cu_att_key_end(32, 5, 0, 1, 100) == 37 &&
              cu_att_key_end(0, 32, 0, 0, 7) == 7 && cu_att_key_end(0, 1, 9, 1, 10) == 10,
          "cu_att_key_end: keys up to the last row's position");
    int64_t Ts[] = {1, 7, 33, 70};
    for (int i = 0; i < 4; i++) {
        attention_case(2, Ts[i], 4, 2, 8, 1, 0, 0);
        attention_case(2, Ts[i], 4, 2, 8, 1, 1, 1);
        attention_case(1, Ts[i], 3, 3, 5, 0, 1, 0);
        attention_case(2, Ts[i], 14, 2, 4, 0, 0, 1);
    }
    attention_case(1, 100, 2, 1, 8, 1, 1, 1);
    cached_case(2, 1, 0, 8, 4, 2, 8);
    cached_case(2, 1, 40, 50, 4, 2, 8);
    cached_case(1, 7, 30, 64, 14, 2, 4);
    cached_case(1, 40, 0, 40, 2, 1, 8);
}

// ---- cross-entropy: rows by block (cu_xent.cu), per-row results summed per block, then blocks in order ----
static void xent_case(int64_t N, int64_t V, int64_t ld, int64_t blocks) {
    float *x = randv(N * ld, 11), *ref = malloc(sizeof(float) * (size_t)(N * ld));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)N);
    for (int64_t n = 0; n < N; n++) {
        x[n * ld + n % V] += 3.0f;   // rows whose label is their maximum, and rows where it is not
        y[n] = n % 5 == 4 ? -100 : (int32_t)((n * 7) % V);
    }
    memcpy(ref, x, sizeof(float) * (size_t)(N * ld));
    int64_t ref_correct = 0, correct = 0;
    double ref_loss = k_xent_fwd_bwd(ref, ld, y, N, V, 0.5f, &ref_correct), loss = 0.0;
    int *seen = calloc((size_t)N, sizeof(int));
    for (int64_t j = 0; j < blocks; j++) {
        double part = 0.0;
        int64_t pc = 0;
        for (int64_t i = 0;; i++) {
            int64_t n = cu_xent_row(j, i, blocks);
            if (n >= N) break;
            seen[n]++;
            part += k_xent_fwd_bwd(x + n * ld, ld, y + n, 1, V, 0.5f, &pc);
        }
        loss += part;
        correct += pc;
    }
    int once = 1;
    for (int64_t n = 0; n < N; n++) once &= seen[n] == 1;
    CHECK(once, "xent N%lld blocks %lld: every row taken by exactly one block", (long long)N, (long long)blocks);
    CHECK(correct == ref_correct, "xent N%lld: correct %lld, the CPU kernel %lld", (long long)N, (long long)correct,
          (long long)ref_correct);
    CHECK(fabs(loss - ref_loss) <= 1e-12 * fabs(ref_loss), "xent N%lld: loss %.17g, the CPU kernel %.17g", (long long)N,
          loss, ref_loss);
    CHECK(memcmp(x, ref, sizeof(float) * (size_t)(N * ld)) == 0, "xent N%lld: the gradient rows", (long long)N);
    free(x), free(ref), free(y), free(seen);
}

// dropout's mask on the device draws the CPU's stream
static void test_rng(void) {
    int same = 1;
    for (uint64_t key = 0; key < 5; key++)
        for (uint64_t i = 0; i < 3000; i += 7) same &= cu_rng_uniform(key * 0x12345ULL, i) == os_rng_uniform(key * 0x12345ULL, i);
    CHECK(same, "cu_rng_uniform equals os_rng_uniform");
}

int main(void) {
    test_rng();
    test_attention();
    xent_case(7, 1001, 1003, 256);
    xent_case(600, 37, 40, 256);
    xent_case(600, 37, 37, 7);
    return check_report("test_cu_index");
}
