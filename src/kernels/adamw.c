#include "kernels/kernels.h"
#include <math.h>

void k_adamw(float *p, float *g, float *m, float *v, int64_t n, float lr, float b1, float b2, float eps,
              float wd, float gscale, int64_t step) {
    // bias corrections in double, as PyTorch computes them on Python floats
    double bc1 = 1.0 - pow((double)b1, (double)step), bc2 = 1.0 - pow((double)b2, (double)step);
    float step_size = (float)((double)lr / bc1), bc2_sqrt = (float)sqrt(bc2), decay = 1.0f - lr * wd;
#pragma omp parallel for simd schedule(static) if (n >= 32768)
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * gscale;
        g[i] = 0.0f;
        float pi = p[i] * decay;
        float mi = m[i] = b1 * m[i] + (1.0f - b1) * gi;
        float vi = v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] = pi - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}
