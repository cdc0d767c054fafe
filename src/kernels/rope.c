// Rotary position embedding in the rotate-half form of Hugging Face Qwen2, on x[B,T,H,D].
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

// sign +1: rotation by +angle (forward); -1: by -angle (the transpose, used by the backward)
static void rotate(float *x, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H, int64_t D,
                   float sign) {
    int64_t half = D / 2;
#pragma omp parallel for schedule(static) if (B * T * H * D >= K_PAR_MIN)
    for (int64_t bt = 0; bt < B * T; bt++) {
        const float *cs = cos_t + (bt % T) * half, *sn = sin_t + (bt % T) * half;
        for (int64_t h = 0; h < H; h++) {
            float *v = x + (bt * H + h) * D;
            for (int64_t j = 0; j < half; j++) {
                float x1 = v[j], x2 = v[j + half], c = cs[j], s = sign * sn[j];
                v[j] = x1 * c - x2 * s;
                v[j + half] = x2 * c + x1 * s;
            }
        }
    }
}

void k_rope_fwd(float *x, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H, int64_t D) {
    rotate(x, cos_t, sin_t, B, T, H, D, 1.0f);
}

void k_rope_bwd(float *dx, const float *cos_t, const float *sin_t, int64_t B, int64_t T, int64_t H, int64_t D) {
    rotate(dx, cos_t, sin_t, B, T, H, D, -1.0f);
}
