// Elementwise helpers on flat float arrays x[N].
#include "kernels/kernels.h"
#include <math.h>

void k_add(float *out, const float *a, const float *b, int64_t N) {
#pragma omp parallel for simd schedule(static) if (N >= K_PAR_MIN)
    for (int64_t i = 0; i < N; i++) out[i] = a[i] + b[i];
}

void k_axpy(float *y, float a, const float *x, int64_t N) {
#pragma omp parallel for simd schedule(static) if (N >= K_PAR_MIN)
    for (int64_t i = 0; i < N; i++) y[i] += a * x[i];
}

void k_scale(float *x, float a, int64_t N) {
#pragma omp parallel for simd schedule(static) if (N >= K_PAR_MIN)
    for (int64_t i = 0; i < N; i++) x[i] *= a;
}

double k_sumsq(const float *x, int64_t N) {
    double s = 0.0;
#pragma omp parallel for simd schedule(static) reduction(+ : s)
    for (int64_t i = 0; i < N; i++) s += (double)x[i] * x[i];
    return s;
}

int64_t k_first_nonfinite(const float *x, int64_t N) {
    int64_t first = N;
#pragma omp parallel for schedule(static) reduction(min : first)
    for (int64_t i = 0; i < N; i++)
        if (!isfinite(x[i]) && i < first) first = i;
    return first < N ? first : -1;
}
