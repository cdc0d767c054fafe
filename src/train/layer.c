#include "train/layer.h"
#include "core/alloc.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "train/lora.h"
#include <string.h>

#define F32(n, what) os_alloc(sizeof(float) * (size_t)(n), what)

void os_layer_ctx_init(os_layer_ctx *c, const os_model *m, const os_batch *b, float lora_dropout) {
    memset(c, 0, sizeof *c);
    c->m = m, c->B = b->B, c->L = b->L, c->N = b->B * b->L, c->keymask = b->keymask;
    int64_t L = b->L, D = m->D, N = c->N;
    c->cos_t = F32(L * D / 2, "rope cos");
    c->sin_t = F32(L * D / 2, "rope sin");
    int32_t *pos = os_alloc(sizeof(int32_t) * (size_t)L, "positions");
    for (int64_t i = 0; i < L; i++) pos[i] = (int32_t)i;
    k_rope_table(c->cos_t, c->sin_t, pos, L, D, (float)m->cfg.rope_theta);
    os_free(pos);
    c->dact = F32(N * m->F, "grad act"), c->dgate = F32(N * m->F, "grad gate"), c->dup = F32(N * m->F, "grad up");
    c->dln = F32(N * m->C, "grad norm"), c->dao = F32(N * m->H * D, "grad attn");
    c->dq = F32(N * m->H * D, "grad q"), c->dk = F32(N * m->KH * D, "grad k"), c->dv = F32(N * m->KH * D, "grad v");
    if (m->oc.lora.rank > 0) {
        int64_t wide = m->F > m->C ? m->F : m->C;
        if (m->H * D > wide) wide = m->H * D;
        c->lora_du = F32(N * m->oc.lora.rank, "LoRA grad");
        c->lora_p = lora_dropout;
        if (lora_dropout > 0) c->lora_xd = F32(N * wide, "LoRA dropped input");
    }
}

void os_layer_ctx_free(os_layer_ctx *c) {
    float *p[] = {c->cos_t, c->sin_t, c->dact, c->dgate, c->dup, c->dln, c->dao, c->dq, c->dk, c->dv, c->lora_du, c->lora_xd};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) os_free(p[i]);
}

void os_layer_act_alloc(os_layer_act *a, const os_layer_ctx *c) {
    const os_model *m = c->m;
    int64_t N = c->N, C = m->C, HD = m->H * m->D, KD = m->KH * m->D, F = m->F;
    a->ln1 = F32(N * C, "ln1"), a->rstd1 = F32(N, "rstd1"), a->q = F32(N * HD, "q"), a->k = F32(N * KD, "k");
    a->v = F32(N * KD, "v"), a->att = F32(c->B * m->H * c->L * c->L, "attention probabilities");
    a->ao = F32(N * HD, "attn out"), a->h = F32(N * C, "residual"), a->ln2 = F32(N * C, "ln2");
    a->rstd2 = F32(N, "rstd2"), a->gate = F32(N * F, "gate"), a->up = F32(N * F, "up"), a->act = F32(N * F, "swiglu");
    for (int t = 0; t < OS_LORA_N; t++)
        a->lora_u[t] = m->oc.lora.targets >> t & 1 && m->oc.lora.rank > 0 ? F32(N * m->oc.lora.rank, "LoRA u") : NULL;
}

void os_layer_act_free(os_layer_act *a) {
    float *p[] = {a->ln1, a->rstd1, a->q, a->k, a->v, a->att, a->ao, a->h, a->ln2, a->rstd2, a->gate, a->up, a->act};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) os_free(p[i]);
    for (int t = 0; t < OS_LORA_N; t++) os_free(a->lora_u[t]);
    memset(a, 0, sizeof *a);
}

// LoRA module t of layer l on input x [N, I]: its op (NULL when t is not targeted)
static const os_lora_op *lora_op(const os_layer_ctx *c, int l, int t, os_lora_op *op) {
    const os_model *m = c->m;
    if (m->layer[l].lora_a[t] < 0) return NULL;
    int64_t O, I;
    os_lora_base(m, l, t, &O, &I);
    *op = (os_lora_op){.N = c->N, .I = I, .O = O, .r = m->oc.lora.rank, .s = m->oc.lora.alpha / (float)m->oc.lora.rank,
                       .p = c->lora_p, .key = os_rng_u64(c->lora_key, (uint64_t)l * OS_LORA_N + (uint64_t)t), .xd = c->lora_xd};
    return op;
}

static void lora_fwd(const os_layer_ctx *c, int l, zr_runtime *rt, int t, const float *x, os_layer_act *a, float *y) {
    os_lora_op op;
    const os_layer_ids *P = &c->m->layer[l];
    if (lora_op(c, l, t, &op)) os_lora_fwd(&op, x, zr_param(rt, P->lora_a[t]), zr_param(rt, P->lora_b[t]), a->lora_u[t], y);
}

// dy: gradient of module t's output; dx += its LoRA part
static void lora_bwd(const os_layer_ctx *c, int l, zr_runtime *rt, int t, const float *x, const os_layer_act *a,
                     const float *dy, float *dx) {
    os_lora_op op;
    const os_layer_ids *P = &c->m->layer[l];
    if (lora_op(c, l, t, &op))
        os_lora_bwd(&op, x, zr_param(rt, P->lora_a[t]), zr_param(rt, P->lora_b[t]), a->lora_u[t], dy, c->lora_du,
                    zr_grad(rt, P->lora_a[t]), zr_grad(rt, P->lora_b[t]), dx);
}

void os_layer_fwd(const os_layer_ctx *c, int l, zr_runtime *rt, const float *x, os_layer_act *a, float *y) {
    const os_model *m = c->m;
    const os_layer_ids *P = &m->layer[l];
    int64_t N = c->N, C = m->C, H = m->H, KH = m->KH, D = m->D, F = m->F;
    float eps = (float)m->cfg.rms_norm_eps;
    k_rmsnorm_fwd(a->ln1, a->rstd1, x, zr_param(rt, P->ln1), N, C, eps);
    k_linear_fwd(a->q, a->ln1, zr_param(rt, P->q_w), zr_param(rt, P->q_b), N, C, H * D);
    k_linear_fwd(a->k, a->ln1, zr_param(rt, P->k_w), zr_param(rt, P->k_b), N, C, KH * D);
    k_linear_fwd(a->v, a->ln1, zr_param(rt, P->v_w), zr_param(rt, P->v_b), N, C, KH * D);
    lora_fwd(c, l, rt, OS_LORA_Q, a->ln1, a, a->q);
    lora_fwd(c, l, rt, OS_LORA_K, a->ln1, a, a->k);
    lora_fwd(c, l, rt, OS_LORA_V, a->ln1, a, a->v);
    k_rope_fwd(a->q, c->cos_t, c->sin_t, c->B, c->L, H, D);
    k_rope_fwd(a->k, c->cos_t, c->sin_t, c->B, c->L, KH, D);
    k_attention_fwd(a->ao, a->att, a->q, a->k, a->v, c->keymask, 1, c->B, c->L, H, KH, D);
    k_linear_fwd(a->h, a->ao, zr_param(rt, P->o_w), NULL, N, H * D, C);
    lora_fwd(c, l, rt, OS_LORA_O, a->ao, a, a->h);
    k_add(a->h, a->h, x, N * C);
    k_rmsnorm_fwd(a->ln2, a->rstd2, a->h, zr_param(rt, P->ln2), N, C, eps);
    k_linear_fwd(a->gate, a->ln2, zr_param(rt, P->gate), NULL, N, C, F);
    k_linear_fwd(a->up, a->ln2, zr_param(rt, P->up), NULL, N, C, F);
    lora_fwd(c, l, rt, OS_LORA_GATE, a->ln2, a, a->gate);
    lora_fwd(c, l, rt, OS_LORA_UP, a->ln2, a, a->up);
    k_swiglu_fwd(a->act, a->gate, a->up, N * F);
    if (y) k_linear_fwd(y, a->act, zr_param(rt, P->down), NULL, N, F, C);
    lora_fwd(c, l, rt, OS_LORA_DOWN, a->act, a, y);   // y NULL (recomputation): keeps its u only
    if (!y) return;
    k_add(y, y, a->h, N * C);
}

static void zero(float *p, int64_t n) { memset(p, 0, sizeof(float) * (size_t)n); }

void os_layer_bwd(const os_layer_ctx *c, int l, zr_runtime *rt, const float *x, const os_layer_act *a, float *dx) {
    const os_model *m = c->m;
    const os_layer_ids *P = &m->layer[l];
    int64_t N = c->N, C = m->C, H = m->H, KH = m->KH, D = m->D, F = m->F;
    // MLP: y = h + down(act)
    zero(c->dact, N * F);
    k_linear_bwd(c->dact, zr_grad(rt, P->down), NULL, dx, a->act, zr_param(rt, P->down), N, F, C);
    lora_bwd(c, l, rt, OS_LORA_DOWN, a->act, a, dx, c->dact);
    zero(c->dgate, N * F), zero(c->dup, N * F);
    k_swiglu_bwd(c->dgate, c->dup, c->dact, a->gate, a->up, N * F);
    zero(c->dln, N * C);
    k_linear_bwd(c->dln, zr_grad(rt, P->gate), NULL, c->dgate, a->ln2, zr_param(rt, P->gate), N, C, F);
    k_linear_bwd(c->dln, zr_grad(rt, P->up), NULL, c->dup, a->ln2, zr_param(rt, P->up), N, C, F);
    lora_bwd(c, l, rt, OS_LORA_GATE, a->ln2, a, c->dgate, c->dln);
    lora_bwd(c, l, rt, OS_LORA_UP, a->ln2, a, c->dup, c->dln);
    k_rmsnorm_bwd(dx, zr_grad(rt, P->ln2), c->dln, a->h, zr_param(rt, P->ln2), a->rstd2, N, C);   // dx = dL/dh
    // attention: h = x + o_proj(attn)
    zero(c->dao, N * H * D);
    k_linear_bwd(c->dao, zr_grad(rt, P->o_w), NULL, dx, a->ao, zr_param(rt, P->o_w), N, H * D, C);
    lora_bwd(c, l, rt, OS_LORA_O, a->ao, a, dx, c->dao);
    zero(c->dq, N * H * D), zero(c->dk, N * KH * D), zero(c->dv, N * KH * D);
    k_attention_bwd(c->dq, c->dk, c->dv, c->dao, a->q, a->k, a->v, a->att, c->B, c->L, H, KH, D);
    k_rope_bwd(c->dq, c->cos_t, c->sin_t, c->B, c->L, H, D);
    k_rope_bwd(c->dk, c->cos_t, c->sin_t, c->B, c->L, KH, D);
    zero(c->dln, N * C);
    k_linear_bwd(c->dln, zr_grad(rt, P->q_w), zr_grad(rt, P->q_b), c->dq, a->ln1, zr_param(rt, P->q_w), N, C, H * D);
    k_linear_bwd(c->dln, zr_grad(rt, P->k_w), zr_grad(rt, P->k_b), c->dk, a->ln1, zr_param(rt, P->k_w), N, C, KH * D);
    k_linear_bwd(c->dln, zr_grad(rt, P->v_w), zr_grad(rt, P->v_b), c->dv, a->ln1, zr_param(rt, P->v_w), N, C, KH * D);
    lora_bwd(c, l, rt, OS_LORA_Q, a->ln1, a, c->dq, c->dln);
    lora_bwd(c, l, rt, OS_LORA_K, a->ln1, a, c->dk, c->dln);
    lora_bwd(c, l, rt, OS_LORA_V, a->ln1, a, c->dv, c->dln);
    k_rmsnorm_bwd(dx, zr_grad(rt, P->ln1), c->dln, x, zr_param(rt, P->ln1), a->rstd1, N, C);   // dx = dL/dx
}
