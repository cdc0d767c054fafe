#include "model/projector.h"
#include "kernels/ops.h"
#include "model/linear.h"
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

void os_projector_fwd(const os_proj_dims *p, const os_proj_w *w, const float *x, int64_t T_s, float *act, float *out) {
    int64_t H = p->hidden, I = p->k * p->d;   // linear1's input width
    float *a = act;
    const float *in1 = x;                      // linear: x[T_s * k, d] read as xc[T_s, k*d]: same memory
    if (p->kind == OS_PROJ_COV1D) {
        float *c = act + T_s * H, *xt = c + T_s * p->d;
        // xt[t, i*k + j] = x[t*k + j, i]: output t's receptive field, channel-major (windows [k, d] -> [d, k])
        os_k->transpose(xt, x, T_s, p->k, p->d);
        os_linear_fwd(c, xt, w->cw, w->cb, T_s, I, p->d);
        os_k->relu_fwd(c, c, T_s * p->d);
        in1 = c, I = p->d;
    }
    os_linear_fwd(a, in1, w->w1, w->b1, T_s, I, H);
    os_k->relu_fwd(a, a, T_s * H);
    os_linear_fwd(out, a, w->w2, w->b2, T_s, H, p->C);
}

void os_projector_bwd(const os_proj_dims *p, const os_proj_w *w, const float *x, const float *act, const float *dout,
                      int64_t T_s, float *scratch, const os_proj_g *g) {
    int64_t H = p->hidden;
    const float *a = act;
    float *da = scratch;
    os_k->zero(da, T_s * H);
    os_linear_bwd(da, g->w2, g->b2, dout, a, w->w2, T_s, H, p->C);
    os_k->relu_grad(da, a, T_s * H);
    if (p->kind != OS_PROJ_COV1D) {
        os_linear_bwd(NULL, g->w1, g->b1, da, x, os_tensor_none(), T_s, p->k * p->d, H);
        return;
    }
    const float *c = act + T_s * H, *xt = c + T_s * p->d;
    float *dc = scratch + T_s * H;
    os_k->zero(dc, T_s * p->d);
    os_linear_bwd(dc, g->w1, g->b1, da, c, w->w1, T_s, p->d, H);
    os_k->relu_grad(dc, c, T_s * p->d);
    os_linear_bwd(NULL, g->cw, g->cb, dc, xt, os_tensor_none(), T_s, p->k * p->d, p->d);
}
