#include "model/projector.h"
#include "kernels/kernels.h"
#include <string.h>

void os_projector_fwd(const os_proj_dims *p, const float *w1, const float *b1, const float *w2, const float *b2,
                      const float *x, int64_t T_s, float *a, float *out) {
    int64_t I = p->k * p->d;
    k_linear_fwd(a, x, w1, b1, T_s, I, p->hidden);   // x[T_s * k, d] read as xc[T_s, k*d]: same memory
    k_relu_fwd(a, a, T_s * p->hidden);
    k_linear_fwd(out, a, w2, b2, T_s, p->hidden, p->C);
}

void os_projector_bwd(const os_proj_dims *p, const float *w2, const float *x, const float *a, const float *dout,
                      int64_t T_s, float *da, float *dw1, float *db1, float *dw2, float *db2) {
    int64_t Hd = p->hidden;
    memset(da, 0, sizeof(float) * (size_t)(T_s * Hd));
    k_linear_bwd(da, dw2, db2, dout, a, w2, T_s, Hd, p->C);
    // ReLU backward in place: relu(h) > 0 exactly where h > 0
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < T_s * Hd; i++)
        if (!(a[i] > 0.0f)) da[i] = 0.0f;
    k_linear_bwd(NULL, dw1, db1, da, x, NULL, T_s, p->k * p->d, Hd);
}
