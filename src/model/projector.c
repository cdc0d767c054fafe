#include "model/projector.h"
#include "kernels/ops.h"
#include <string.h>

int os_proj_kind_parse(const char *name) {
    if (!strcmp(name, "linear")) return OS_PROJ_LINEAR;
    if (!strcmp(name, "cov1d-linear")) return OS_PROJ_COV1D;
    return -1;
}

const char *os_proj_kind_name(os_proj_kind k) { return k == OS_PROJ_COV1D ? "cov1d-linear" : "linear"; }

// cov1d-linear: act = [a: T_s*hidden][c: T_s*d][xt: T_s*k*d], scratch = [da: T_s*hidden][dc: T_s*d]
int64_t os_projector_act_floats(const os_proj_dims *p) {
    return p->hidden + (p->kind == OS_PROJ_COV1D ? p->d + p->k * p->d : 0);
}

int64_t os_projector_scratch_floats(const os_proj_dims *p) { return p->hidden + (p->kind == OS_PROJ_COV1D ? p->d : 0); }

// xt[T_s, d*k]: xt[t, i*k + j] = x[t*k + j, i] (the convolution's receptive field of output t, channel-major)
static void conv_input(const os_proj_dims *p, const float *x, int64_t T_s, float *xt) {
    int64_t k = p->k, d = p->d;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T_s; t++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t i = 0; i < d; i++) xt[t * d * k + i * k + j] = x[(t * k + j) * d + i];
}

// zero the gradient where the ReLU output is not positive (relu(h) > 0 exactly where h > 0)
static void relu_mask(float *g, const float *y, int64_t n) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++)
        if (!(y[i] > 0.0f)) g[i] = 0.0f;
}

void os_projector_fwd(const os_proj_dims *p, const os_proj_w *w, const float *x, int64_t T_s, float *act, float *out) {
    int64_t H = p->hidden, I = p->k * p->d;   // linear1's input width
    float *a = act;
    const float *in1 = x;                      // linear: x[T_s * k, d] read as xc[T_s, k*d]: same memory
    if (p->kind == OS_PROJ_COV1D) {
        float *c = act + T_s * H, *xt = c + T_s * p->d;
        conv_input(p, x, T_s, xt);
        os_k->linear_fwd(c, xt, w->cw, w->cb, T_s, I, p->d);
        os_k->relu_fwd(c, c, T_s * p->d);
        in1 = c, I = p->d;
    }
    os_k->linear_fwd(a, in1, w->w1, w->b1, T_s, I, H);
    os_k->relu_fwd(a, a, T_s * H);
    os_k->linear_fwd(out, a, w->w2, w->b2, T_s, H, p->C);
}

void os_projector_bwd(const os_proj_dims *p, const os_proj_w *w, const float *x, const float *act, const float *dout,
                      int64_t T_s, float *scratch, const os_proj_g *g) {
    int64_t H = p->hidden;
    const float *a = act;
    float *da = scratch;
    os_k->zero(da, T_s * H);
    os_k->linear_bwd(da, g->w2, g->b2, dout, a, w->w2, T_s, H, p->C);
    relu_mask(da, a, T_s * H);
    if (p->kind != OS_PROJ_COV1D) {
        os_k->linear_bwd(NULL, g->w1, g->b1, da, x, NULL, T_s, p->k * p->d, H);
        return;
    }
    const float *c = act + T_s * H, *xt = c + T_s * p->d;
    float *dc = scratch + T_s * H;
    os_k->zero(dc, T_s * p->d);
    os_k->linear_bwd(dc, g->w1, g->b1, da, c, w->w1, T_s, p->d, H);
    relu_mask(dc, c, T_s * p->d);
    os_k->linear_bwd(NULL, g->cw, g->cb, dc, xt, NULL, T_s, p->k * p->d, p->d);
}
