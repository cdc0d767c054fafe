// Inverted dropout with a counter-based mask (no mask stored: element i's keep is a function of key and i).
#include "kernels/kernels.h"
#include "core/rng.h"

void k_dropout(float *out, const float *inp, int64_t N, float p, uint64_t key, int acc) {
    float sc = 1.0f / (1.0f - p);
    if (acc) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < N; i++)
            if (os_rng_uniform(key, (uint64_t)i) >= p) out[i] += inp[i] * sc;
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) out[i] = os_rng_uniform(key, (uint64_t)i) >= p ? inp[i] * sc : 0.0f;
}
