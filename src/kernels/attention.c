// Scaled dot-product attention with grouped KV heads, per (batch, head) on sgemm:
//   S = scale * Q K^T [T,T], P = masked softmax(S) (saved in att), O = P V.
// Q, K, V and O are read in place from the [B,T,heads,D] layouts through sgemm row strides.
#include "kernels/kernels.h"
#include "core/alloc.h"
#include <math.h>

// row t of S[T,T] -> masked softmax in place; masked entries and rows with no allowed key become 0
static void softmax_rows(float *S, const uint8_t *km, int causal, int64_t T) {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        float *row = S + t * T;
        int64_t end = causal ? t + 1 : T;   // keys s >= end are masked
        float mx = -INFINITY;
        for (int64_t s = 0; s < end; s++)
            if ((!km || km[s]) && row[s] > mx) mx = row[s];
        if (mx == -INFINITY) {   // no allowed key (or only -inf scores)
            for (int64_t s = 0; s < T; s++) row[s] = 0.0f;
            continue;
        }
        double sum = 0.0;
        for (int64_t s = 0; s < end; s++) {
            float e = (!km || km[s]) ? expf(row[s] - mx) : 0.0f;
            row[s] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        for (int64_t s = 0; s < end; s++) row[s] *= inv;
        for (int64_t s = end; s < T; s++) row[s] = 0.0f;
    }
}

void k_attention_fwd(float *out, float *att, const float *q, const float *k, const float *v, const uint8_t *keymask,
                     int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D) {
    if (B <= 0 || T <= 0 || H <= 0 || KH <= 0) return;
    int64_t R = H / KH;   // query heads per kv head
    float scale = D > 0 ? 1.0f / sqrtf((float)D) : 1.0f;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            float *P = att + (b * H + h) * T * T;
            const float *qb = q + (b * T * H + h) * D;
            const float *kb = k + (b * T * KH + h / R) * D, *vb = v + (b * T * KH + h / R) * D;
            k_gemm(0, 1, T, T, D, scale, qb, H * D, kb, KH * D, 0.0f, P, T);
            softmax_rows(P, keymask ? keymask + b * T : NULL, causal, T);
            k_gemm(0, 0, T, D, T, 1.0f, P, T, vb, KH * D, 0.0f, out + (b * T * H + h) * D, H * D);
        }
}

// dV += P^T dO;  dP = dO V^T;  dS = P * (dP - rowsum(P * dP));  dQ += scale dS K;  dK += scale dS^T Q
void k_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                     const float *v, const float *att, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D) {
    if (B <= 0 || T <= 0 || H <= 0 || KH <= 0 || D <= 0) return;
    int64_t R = H / KH;
    float scale = 1.0f / sqrtf((float)D);
    float *dS = (dq || dk) ? os_alloc((size_t)(T * T) * sizeof(float), "attention backward dS[T,T]") : NULL;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const float *P = att + (b * H + h) * T * T;
            int64_t qo = (b * T * H + h) * D, ko = (b * T * KH + h / R) * D;
            if (dv) k_gemm(1, 0, T, D, T, 1.0f, P, T, dout + qo, H * D, 1.0f, dv + ko, KH * D);
            if (!dS) continue;
            k_gemm(0, 1, T, T, D, 1.0f, dout + qo, H * D, v + ko, KH * D, 0.0f, dS, T);
#pragma omp parallel for schedule(static)
            for (int64_t t = 0; t < T; t++) {
                const float *p = P + t * T;
                float *d = dS + t * T;
                double dot = 0.0;
                for (int64_t s = 0; s < T; s++) dot += (double)p[s] * d[s];
                float df = (float)dot;
                for (int64_t s = 0; s < T; s++) d[s] = p[s] * (d[s] - df);
            }
            if (dq) k_gemm(0, 0, T, D, T, scale, dS, T, k + ko, KH * D, 1.0f, dq + qo, H * D);
            if (dk) k_gemm(1, 0, T, D, T, scale, dS, T, q + qo, H * D, 1.0f, dk + ko, KH * D);
        }
    os_free(dS);
}
