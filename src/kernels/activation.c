// Elementwise activations on x[N]: SwiGLU (silu(gate) * up), exact GELU, ReLU; backward accumulates (SwiGLU's: or
// overwrites, acc 0).
#include "kernels/kernels.h"
#include "kernels/vexp.h"
#include <math.h>

void k_swiglu_fwd(float *out, const float *gate, const float *up, int64_t N) {
#pragma omp parallel for simd schedule(static) if (N >= K_PAR_MIN)
    for (int64_t i = 0; i < N; i++) out[i] = gate[i] / (1.0f + k_expf(-gate[i])) * up[i];
}

// d silu(g) / dg = s * (1 + g * (1 - s)), s = sigmoid(g). acc 0 adds the terms to 0 (a -0 becomes +0, as when
// accumulating onto zeros) without reading dgate and dup
void k_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t N,
                  int acc) {
#pragma omp parallel for simd schedule(static) if (N >= K_PAR_MIN)
    for (int64_t i = 0; i < N; i++) {
        float g = gate[i], s = 1.0f / (1.0f + k_expf(-g));
        if (dgate) dgate[i] = (acc ? dgate[i] : 0.0f) + dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
        if (dup) dup[i] = (acc ? dup[i] : 0.0f) + dout[i] * g * s;
    }
}

void k_gelu_fwd(float *out, const float *inp, int64_t N) {
#pragma omp parallel for simd schedule(static) if (N >= K_PAR_MIN)
    for (int64_t i = 0; i < N; i++) out[i] = 0.5f * inp[i] * (1.0f + erff(inp[i] * (float)M_SQRT1_2));
}

// d gelu / dx = Phi(x) + x * phi(x)
void k_gelu_bwd(float *dinp, const float *dout, const float *inp, int64_t N) {
    const float inv_sqrt_2pi = 0.3989422804014327f;
    if (!dinp) return;
#pragma omp parallel for simd schedule(static) if (N >= K_PAR_MIN)
    for (int64_t i = 0; i < N; i++) {
        float x = inp[i];
        float cdf = 0.5f * (1.0f + erff(x * (float)M_SQRT1_2)), pdf = inv_sqrt_2pi * k_expf(-0.5f * x * x);
        dinp[i] += dout[i] * (cdf + x * pdf);
    }
}

void k_relu_fwd(float *out, const float *inp, int64_t N) {
#pragma omp parallel for simd schedule(static) if (N >= K_PAR_MIN)
    for (int64_t i = 0; i < N; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void k_relu_bwd(float *dinp, const float *dout, const float *inp, int64_t N) {
    if (!dinp) return;
#pragma omp parallel for simd schedule(static) if (N >= K_PAR_MIN)
    for (int64_t i = 0; i < N; i++) dinp[i] += inp[i] > 0.0f ? dout[i] : 0.0f;
}

void k_relu_grad(float *dy, const float *y, int64_t N) {
#pragma omp parallel for simd schedule(static) if (N >= K_PAR_MIN)
    for (int64_t i = 0; i < N; i++)
        if (!(y[i] > 0.0f)) dy[i] = 0.0f;
}
