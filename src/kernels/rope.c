// Rotary position embedding in the rotate-half form of Hugging Face Qwen2, on q[B,T,H,D] and k[B,T,KH,D] in one call.
#include "kernels/kernels.h"
#include <math.h>

// cos_t[T, D/2], sin_t[T, D/2]; every step in float32 as HF does (inv_freq, then pos * inv_freq, then cos/sin)
void k_rope_table(float *cos_t, float *sin_t, const int32_t *pos, int64_t T, int64_t D, float theta) {
    int64_t half = D / 2;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < half; j++) {
            float inv_freq = 1.0f / powf(theta, (float)(2 * j) / (float)D);
            float angle = (float)pos[t] * inv_freq;
            cos_t[t * half + j] = cosf(angle);
            sin_t[t * half + j] = sinf(angle);
        }
}

// the H rows x[H, D] of one position by its cos/sin cs, sn [D/2]; sign +1: rotation by +angle (forward), -1: by
// -angle (the transpose, used by the backward)
static inline void rotate_rows(float *x, int64_t H, int64_t D, const float *cs, const float *sn, float sign) {
    int64_t half = D / 2;
    for (int64_t h = 0; h < H; h++) {
        float *v = x + h * D;
        for (int64_t j = 0; j < half; j++) {
            float x1 = v[j], x2 = v[j + half], c = cs[j], s = sign * sn[j];
            v[j] = x1 * c - x2 * s;
            v[j + half] = x2 * c + x1 * s;
        }
    }
}

// q[B,T,H,D] and k[B,T,KH,D] (NULL: none) position by position
static void rotate(float *q, float *k, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H,
                   int64_t KH, int64_t D, float sign) {
    int64_t half = D / 2, nk = k ? KH : 0;
#pragma omp parallel for schedule(static) if (B * T * (H + nk) * D >= K_PAR_MIN)
    for (int64_t bt = 0; bt < B * T; bt++) {
        const float *cs = cos_t + (bt % T) * half, *sn = sin_t + (bt % T) * half;
        rotate_rows(q + bt * H * D, H, D, cs, sn, sign);
        if (k) rotate_rows(k + bt * KH * D, KH, D, cs, sn, sign);
    }
}

void k_rope_fwd(float *q, float *k, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H,
                int64_t KH, int64_t D) {
    rotate(q, k, cos_t, sin_t, B, T, H, KH, D, 1.0f);
}

void k_rope_bwd(float *dq, float *dk, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H,
                int64_t KH, int64_t D) {
    rotate(dq, dk, cos_t, sin_t, B, T, H, KH, D, -1.0f);
}
