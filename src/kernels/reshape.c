// Moving elements without arithmetic: batched transposes.
#include "kernels/kernels.h"

void k_transpose(float *out, const float *inp, int64_t nb, int64_t R, int64_t C) {
    int64_t per = R * C;
#pragma omp parallel for schedule(static) if (nb * per >= K_PAR_MIN)
    for (int64_t b = 0; b < nb; b++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t r = 0; r < R; r++) out[b * per + c * R + r] = inp[b * per + r * C + c];
}
