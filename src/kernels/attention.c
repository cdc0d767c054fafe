// Scaled dot-product attention with grouped KV heads on sgemm, by blocks of BQ query rows:
//   S = scale * Q K^T, P = masked softmax(S) (saved in att[B,H,T,T]: the stats, k_attention_stats_floats), O = P V.
// Q, K, V and O are read in place from the [B,T,heads,D] layouts through sgemm row strides.
// Keys that no query row of a block may see (causal: keys after the block's last row; padding after the last real
// key; with segment ids, keys before the first one of the block's segments) are left out of the block's products:
// their probabilities are 0 and their gradient terms exactly 0.
// Threads: the forward runs heads in parallel and the backward kv-head groups (each group owns its dk/dv rows, so
// every sum keeps one fixed order); with fewer heads or groups than threads, the products are split instead.
#include "kernels/kernels.h"
#include "kernels/vexp.h"
#include "core/alloc.h"
#include <math.h>
#include <omp.h>
#include <string.h>

enum { BQ = K_ATTN_BQ };   // query rows per block

// rows t in [t0, t0+n) of att (row stride T), scores valid in columns [k0, kend) -> masked softmax in place;
// every other entry of the rows, and every entry of a row with no allowed key, becomes 0. sg: the row's segment
// ids [T] (NULL: one segment); key s is masked for query t when sg[s] != sg[t]
static void softmax_rows(float *S, const uint8_t *km, const int32_t *sg, int causal, int64_t t0, int64_t n,
                         int64_t k0, int64_t kend, int64_t T) {
#pragma omp parallel for schedule(static)
    for (int64_t t = t0; t < t0 + n; t++) {
        float *row = S + (t - t0) * T;
        int64_t end = causal && t + 1 < kend ? t + 1 : kend;   // keys s >= end are masked
        float mx = -INFINITY;
        for (int64_t s = 0; s < k0; s++) row[s] = 0.0f;
        if (sg)
            for (int64_t s = k0; s < end; s++) row[s] = sg[s] != sg[t] ? -INFINITY : row[s];
#pragma omp simd reduction(max : mx)
        for (int64_t s = k0; s < end; s++) {
            float x = km && !km[s] ? -INFINITY : row[s];
            mx = x > mx ? x : mx;
        }
        if (mx == -INFINITY) {   // no allowed key (or only -inf scores)
            for (int64_t s = 0; s < T; s++) row[s] = 0.0f;
            continue;
        }
#pragma omp simd
        for (int64_t s = k0; s < end; s++) row[s] = k_expf(row[s] - mx);
        if (km)
            for (int64_t s = k0; s < end; s++) row[s] = km[s] ? row[s] : 0.0f;
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (int64_t s = k0; s < end; s++) sum += row[s];
        float inv = (float)(1.0 / sum);
        for (int64_t s = k0; s < end; s++) row[s] *= inv;
        for (int64_t s = end; s < T; s++) row[s] = 0.0f;
    }
}

// the first key any query row t in [r0, r0+n) may see under the segment ids sg[T] (0 without them): keys before
// it belong to other segments only, and the block's products leave them out
static int64_t first_key(const int32_t *sg, int64_t r0, int64_t n, int64_t kend) {
    if (!sg) return 0;
    int32_t ids[BQ];   // the block's segment ids, once per run of equal ids (packed samples: a few runs)
    int nid = 0;
    for (int64_t t = r0; t < r0 + n; t++)
        if (t == r0 || sg[t] != sg[t - 1]) ids[nid++] = sg[t];
    for (int64_t s = 0; s < kend; s++)
        for (int i = 0; i < nid; i++)
            if (sg[s] == ids[i]) return s;
    return kend;
}

int64_t k_attention_stats_floats(int64_t B, int64_t T, int64_t H) { return B * H * T * T; }

void k_attention_fwd_prec(int bf16, float *out, float *att, const float *q, const float *k, const float *v, const uint8_t *keymask,
                     const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D) {
    if (B <= 0 || T <= 0 || H <= 0 || KH <= 0) return;
    int64_t R = H / KH;   // query heads per kv head
    float scale = D > 0 ? 1.0f / sqrtf((float)D) : 1.0f;
#pragma omp parallel for schedule(dynamic, 1) if (B * H >= omp_get_max_threads())
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t b = bh / H, h = bh % H;
        const uint8_t *km = keymask ? keymask + b * T : NULL;
        const int32_t *sg = seg ? seg + b * T : NULL;
        int64_t klen = T;   // keys after the last real one are padding
        while (km && klen > 0 && !km[klen - 1]) klen--;
        float *P = att + (b * H + h) * T * T;
        const float *kb = k + (b * T * KH + h / R) * D, *vb = v + (b * T * KH + h / R) * D;
        for (int64_t r0 = 0; r0 < T; r0 += BQ) {
            int64_t n = T - r0 < BQ ? T - r0 : BQ, kend = causal && r0 + n < klen ? r0 + n : klen;
            int64_t k0 = first_key(sg, r0, n, kend);
            const float *qb = q + ((b * T + r0) * H + h) * D;
            float *ob = out + ((b * T + r0) * H + h) * D;
            if (k0 < kend) k_gemm_prec(bf16, 0, 1, n, kend - k0, D, scale, qb, H * D, kb + k0 * KH * D, KH * D, 0.0f, P + r0 * T + k0, T);
            softmax_rows(P + r0 * T, km, sg, causal, r0, n, k0, kend, T);
            if (k0 < kend) k_gemm_prec(bf16, 0, 0, n, D, kend - k0, 1.0f, P + r0 * T + k0, T, vb + k0 * KH * D, KH * D, 0.0f, ob, H * D);
            else for (int64_t t = 0; t < n; t++) memset(ob + t * H * D, 0, sizeof(float) * (size_t)D);
        }
    }
}

void k_attention_cached_fwd_prec(int bf16, float *out, const float *q, const float *kc, const float *vc, int64_t B, int64_t T,
                            int64_t p0, int64_t S, int64_t H, int64_t KH, int64_t D) {
    if (B <= 0 || T <= 0 || H <= 0 || KH <= 0) return;
    int64_t R = H / KH, K = p0 + T;   // keys in use
    float scale = D > 0 ? 1.0f / sqrtf((float)D) : 1.0f;
#pragma omp parallel for schedule(dynamic, 1) if (B * H >= omp_get_max_threads())
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t b = bh / H, h = bh % H;
        float *P = os_alloc(sizeof(float) * (size_t)(T * K), "cached attention probabilities[T, p0+T]");
        const float *kb = kc + (b * S * KH + h / R) * D, *vb = vc + (b * S * KH + h / R) * D;
        const float *qb = q + (b * T * H + h) * D;
        k_gemm_prec(bf16, 0, 1, T, K, D, scale, qb, H * D, kb, KH * D, 0.0f, P, K);
        softmax_rows(P, NULL, NULL, 1, p0, T, 0, K, K);   // row i is position p0+i: keys 0..p0+i
        k_gemm_prec(bf16, 0, 0, T, D, K, 1.0f, P, K, vb, KH * D, 0.0f, out + (b * T * H + h) * D, H * D);
        os_free(P);
    }
}

// 1 + the last column of rows P[n, T] holding a nonzero probability (0 if none)
static int64_t used_keys(const float *P, int64_t n, int64_t T) {
    int64_t kend = 0;
    for (int64_t i = n - 1; i >= 0; i--)
        for (int64_t s = T - 1; s >= kend; s--)
            if (P[i * T + s] != 0.0f) {
                kend = s + 1;
                break;
            }
    return kend;
}

// per block of query rows, over its used keys [k0, kend) (k0 = first_key: 0 without segment ids):
// dV += P^T dO;  dP = dO V^T;  dS = P * (dP - rowsum(P * dP));  dQ += scale dS K;  dK += scale dS^T Q
// (out and keymask are not needed: att holds the probabilities, which carry the masks). acc 0: the gradients are
// zeroed first (the same sums: the bits of zeroing them before the call)
void k_attention_bwd_prec(int bf16, float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                     const float *v, const float *out, const float *att, const uint8_t *keymask, const int32_t *seg,
                     int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D, int acc) {
    (void)out, (void)keymask, (void)causal;
    if (B <= 0 || T <= 0 || H <= 0 || KH <= 0 || D <= 0) return;
    if (!acc) {
        if (dq) memset(dq, 0, sizeof(float) * (size_t)(B * T * H * D));
        if (dk) memset(dk, 0, sizeof(float) * (size_t)(B * T * KH * D));
        if (dv) memset(dv, 0, sizeof(float) * (size_t)(B * T * KH * D));
    }
    int64_t R = H / KH;
    float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for schedule(dynamic, 1) if (B * KH >= omp_get_max_threads())
    for (int64_t bg = 0; bg < B * KH; bg++) {
        int64_t b = bg / KH, g = bg % KH;
        const int32_t *sg = seg ? seg + b * T : NULL;
        float *dS = (dq || dk) ? os_alloc((size_t)(BQ * T) * sizeof(float), "attention backward dS[BQ,T]") : NULL;
        for (int64_t h = g * R; h < (g + 1) * R; h++)
            for (int64_t r0 = 0; r0 < T; r0 += BQ) {
                int64_t n = T - r0 < BQ ? T - r0 : BQ, qo = ((b * T + r0) * H + h) * D;
                int64_t kend = used_keys(att + ((b * H + h) * T + r0) * T, n, T), k0 = first_key(sg, r0, n, kend);
                int64_t w = kend - k0, ko = ((b * T + k0) * KH + g) * D;
                const float *P = att + ((b * H + h) * T + r0) * T + k0;
                if (w <= 0) continue;
                if (dv) k_gemm_prec(bf16, 1, 0, w, D, n, 1.0f, P, T, dout + qo, H * D, 1.0f, dv + ko, KH * D);
                if (!dS) continue;
                k_gemm_prec(bf16, 0, 1, n, w, D, 1.0f, dout + qo, H * D, v + ko, KH * D, 0.0f, dS, w);
#pragma omp parallel for schedule(static)
                for (int64_t t = 0; t < n; t++) {
                    const float *p = P + t * T;
                    float *d = dS + t * w;
                    double dot = 0.0;
                    for (int64_t s = 0; s < w; s++) dot += (double)p[s] * d[s];
                    float df = (float)dot;
                    for (int64_t s = 0; s < w; s++) d[s] = p[s] * (d[s] - df);
                }
                if (dq) k_gemm_prec(bf16, 0, 0, n, D, w, scale, dS, w, k + ko, KH * D, 1.0f, dq + qo, H * D);
                if (dk) k_gemm_prec(bf16, 1, 0, w, D, n, scale, dS, w, q + qo, H * D, 1.0f, dk + ko, KH * D);
            }
        os_free(dS);
    }
}

// the fp32 kernels (kernels.h)
void k_attention_fwd(float *out, float *att, const float *q, const float *k, const float *v, const uint8_t *keymask,
                     const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D) {
    k_attention_fwd_prec(0, out, att, q, k, v, keymask, seg, causal, B, T, H, KH, D);
}
void k_attention_cached_fwd(float *out, const float *q, const float *kc, const float *vc, int64_t B, int64_t T,
                            int64_t p0, int64_t S, int64_t H, int64_t KH, int64_t D) {
    k_attention_cached_fwd_prec(0, out, q, kc, vc, B, T, p0, S, H, KH, D);
}
void k_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                     const float *v, const float *out, const float *att, const uint8_t *keymask, const int32_t *seg,
                     int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D, int acc) {
    k_attention_bwd_prec(0, dq, dk, dv, dout, q, k, v, out, att, keymask, seg, causal, B, T, H, KH, D, acc);
}
