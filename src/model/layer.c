#include "model/layer.h"
#include "core/rng.h"
#include "kernels/ops.h"
#include "model/lora.h"
#include "model/linear.h"

// LoRA module t of layer l on input x [N, I]: its op (NULL when t is not targeted)
static const os_lora_op *lora_op(const os_layer_ctx *c, int l, const os_layer_weights *w, int t, os_lora_op *op) {
    const os_model *m = c->m;
    if (!w->lora_a[t].data) return NULL;
    int64_t O, I;
    os_lora_base(m, l, t, &O, &I);
    *op = (os_lora_op){.N = c->N, .I = I, .O = O, .r = m->oc.lora.rank, .s = m->oc.lora.alpha / (float)m->oc.lora.rank,
                       .p = c->lora_p, .key = os_rng_u64(c->lora_key, (uint64_t)l * OS_LORA_N + (uint64_t)t), .xd = c->lora_xd,
                       .uf = c->lora_du};
    return op;
}

// module t's u [N, r] as its products read it: the fp32 buffer, or its bf16 store (model/layer.h)
static os_tensor lora_u(const os_layer_act *a, int t, int64_t N, int64_t r) {
    return a->lora_uh[t] ? os_mat(a->lora_uh[t], OS_BF16, N, r, r) : os_matf(a->lora_u[t], N, r, r);
}

static void lora_fwd(const os_layer_ctx *c, int l, const os_layer_weights *w, int t, os_tensor x, os_layer_act *a, float *y) {
    os_lora_op op;
    if (lora_op(c, l, w, t, &op)) os_lora_fwd(&op, x, w->lora_a[t], w->lora_b[t], lora_u(a, t, op.N, op.r), y);
}

// dy: gradient of module t's output; dx += its LoRA part
static void lora_bwd(const os_layer_ctx *c, int l, const os_layer_weights *w, const os_layer_grads *g, int t,
                     os_tensor x, const os_layer_act *a, os_tensor dy, float *dx) {
    os_lora_op op;
    if (lora_op(c, l, w, t, &op))
        os_lora_bwd(&op, x, w->lora_a[t], w->lora_b[t], lora_u(a, t, op.N, op.r), dy, c->lora_du, g->lora_a[t],
                    g->lora_b[t], dx);
}

// the activation x [N, W] as its products read it: its bf16 store h (NULL: none, x itself), rounded from x
// first when round (where x is produced)
static os_tensor stored(const float *x, void *h, int64_t N, int64_t W, int round) {
    if (!h) return os_matf(x, N, W, W);
    os_tensor t = os_mat(h, OS_BF16, N, W, W);
    if (round) os_k->cast(t, os_matf(x, N, W, W));
    return t;
}

// attention of the rows' q over the cache (earlier positions) and their own k/v, which are appended to it
static void cached_attention(const os_layer_ctx *c, int l, os_layer_act *a) {
    os_kv_cache *kv = c->kv;
    int64_t KD = kv->KH * kv->D, lay = (int64_t)l * kv->B * kv->cap * KD;
    float *kc = kv->k + lay, *vc = kv->v + lay;
    for (int64_t b = 0; b < c->B; b++) {
        os_k->copy(kc + (b * kv->cap + c->p0) * KD, a->k + b * c->L * KD, c->L * KD);
        os_k->copy(vc + (b * kv->cap + c->p0) * KD, a->v + b * c->L * KD, c->L * KD);
    }
    os_k->attention_cached_fwd(a->ao, a->q, kc, vc, c->B, c->L, c->p0, kv->cap, c->m->H, kv->KH, kv->D);
}

// RoPE on q [B, L, H, D] and k [B, L, KH, D] in place, both in one call (bwd: its transpose), positions from p0,
// the tables of c
static void rope(const os_layer_ctx *c, float *q, float *k, int bwd) {
    int64_t H = c->m->H, KH = c->m->KH, D = c->m->D;
    void (*f)(float *, float *, const float *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t) =
        bwd ? os_k->rope_bwd : os_k->rope_fwd;
    const float *cs = c->cos_t + c->p0 * D / 2, *sn = c->sin_t + c->p0 * D / 2;
    if (!c->rope_ld) f(q, k, cs, sn, c->B, c->L, H, KH, D);
    for (int64_t b = 0; c->rope_ld && b < c->B; b++)
        f(q + b * c->L * H * D, k + b * c->L * KH * D, cs + b * c->rope_ld, sn + b * c->rope_ld, 1, c->L, H, KH, D);
}

// one position per sample, each with its own cache (c->kvs, ragged lengths): RoPE at the sample's position and
// attention over its cache, one sample at a time (B = 1 calls of the seam); q [B, H*D], k/v [B, KH*D]
static void ragged_rope_attention(const os_layer_ctx *c, int l, os_layer_act *a) {
    int64_t H = c->m->H, KH = c->m->KH, D = c->m->D;
    for (int64_t b = 0; b < c->B; b++) {
        os_kv_cache *kv = c->kvs[b];
        const float *cs = c->cos_t + kv->len * D / 2, *sn = c->sin_t + kv->len * D / 2;
        float *kc = kv->k + (int64_t)l * kv->cap * KH * D, *vc = kv->v + (int64_t)l * kv->cap * KH * D;
        os_k->rope_fwd(a->q + b * H * D, a->k + b * KH * D, cs, sn, 1, 1, H, KH, D);
        os_k->copy(kc + kv->len * KH * D, a->k + b * KH * D, KH * D);
        os_k->copy(vc + kv->len * KH * D, a->v + b * KH * D, KH * D);
        os_k->attention_cached_fwd(a->ao + b * H * D, a->q + b * H * D, kc, vc, 1, 1, kv->len, kv->cap, H, KH, D);
    }
}

void os_layer_fwd(const os_layer_ctx *c, int l, const os_layer_weights *w, const float *x, os_layer_act *a, float *y) {
    const os_model *m = c->m;
    int64_t N = c->N, C = m->C, H = m->H, KH = m->KH, D = m->D, F = m->F;
    float eps = (float)m->cfg.rms_norm_eps;
    os_k->rmsnorm_fwd(a->ln1, a->rstd1, (float *)x, NULL, w->ln1.data, N, C, eps);   // x not written (no residual)
    os_tensor ln1 = stored(a->ln1, a->ln1h, N, C, 1);
    os_linear_fwd_t(a->q, ln1, w->q_w, w->q_b.data, N, H * D);
    os_linear_fwd_t(a->k, ln1, w->k_w, w->k_b.data, N, KH * D);
    os_linear_fwd_t(a->v, ln1, w->v_w, w->v_b.data, N, KH * D);
    lora_fwd(c, l, w, OS_LORA_Q, ln1, a, a->q);
    lora_fwd(c, l, w, OS_LORA_K, ln1, a, a->k);
    lora_fwd(c, l, w, OS_LORA_V, ln1, a, a->v);
    if (c->kvs) {
        ragged_rope_attention(c, l, a);
    } else {
        rope(c, a->q, a->k, 0);
        if (c->kv) cached_attention(c, l, a);
        else os_k->attention_fwd(a->ao, a->att, a->q, a->k, a->v, c->keymask, c->seg, 1, c->B, c->L, H, KH, D);
    }
    os_linear_fwd(a->h, a->ao, w->o_w, NULL, N, H * D, C);
    lora_fwd(c, l, w, OS_LORA_O, os_matf(a->ao, N, H * D, H * D), a, a->h);
    os_k->rmsnorm_fwd(a->ln2, a->rstd2, a->h, x, w->ln2.data, N, C, eps);   // h += x (the residual), its norm
    os_tensor ln2 = stored(a->ln2, a->ln2h, N, C, 1);
    os_linear_fwd_t(a->gate, ln2, w->gate, NULL, N, F);
    os_linear_fwd_t(a->up, ln2, w->up, NULL, N, F);
    lora_fwd(c, l, w, OS_LORA_GATE, ln2, a, a->gate);
    lora_fwd(c, l, w, OS_LORA_UP, ln2, a, a->up);
    os_k->swiglu_fwd(a->act, a->gate, a->up, N * F);
    os_tensor act = stored(a->act, a->acth, N, F, 1);
    if (y) os_linear_fwd_t(y, act, w->down, NULL, N, C);
    lora_fwd(c, l, w, OS_LORA_DOWN, act, a, y);   // y NULL (recomputation): keeps its u only
    if (!y) return;
    os_k->add(y, y, a->h, N * C);
}

void os_layer_bwd(const os_layer_ctx *c, int l, const os_layer_weights *w, const os_layer_grads *g, const float *x,
                  const os_layer_act *a, float *dx) {
    const os_model *m = c->m;
    int64_t N = c->N, C = m->C, H = m->H, KH = m->KH, D = m->D, F = m->F;
    os_tensor ln1 = stored(a->ln1, a->ln1h, N, C, 0), ln2 = stored(a->ln2, a->ln2h, N, C, 0);
    os_tensor act = stored(a->act, a->acth, N, F, 0);
    // MLP: y = h + down(act)
    os_linear_bwd_set_t(c->dact, g->down, NULL, dx, act, w->down, N, F, C);
    lora_bwd(c, l, w, g, OS_LORA_DOWN, act, a, os_matf(dx, N, C, C), c->dact);
    os_k->swiglu_bwd(c->dgate, c->dup, c->dact, a->gate, a->up, N * F, 0);
    // dgate and dup [N, F]: read by products only (gate/up input and weight gradients, their LoRA's dB and du), so
    // under bf16 rounded once (cast) into bf16 stores in dact's memory (free now: 2 x 2NF bytes = its 4NF)
    os_tensor dgate = os_matf(c->dgate, N, F, F), dup = os_matf(c->dup, N, F, F);
    if (os_k->bf16) {
        os_tensor hg = os_mat(c->dact, OS_BF16, N, F, F), hu = os_mat((uint16_t *)(void *)c->dact + N * F, OS_BF16, N, F, F);
        os_k->cast(hg, dgate), os_k->cast(hu, dup);
        dgate = hg, dup = hu;
    }
    os_linear_bwd_v(0.0f, c->dln, g->gate, dgate, ln2, w->gate, C);
    os_linear_bwd_v(1.0f, c->dln, g->up, dup, ln2, w->up, C);
    lora_bwd(c, l, w, g, OS_LORA_GATE, ln2, a, dgate, c->dln);
    lora_bwd(c, l, w, g, OS_LORA_UP, ln2, a, dup, c->dln);
    os_k->rmsnorm_bwd(dx, g->ln2, c->dln, a->h, w->ln2.data, a->rstd2, N, C);   // dx = dL/dh
    // attention: h = x + o_proj(attn)
    os_linear_bwd_set(c->dao, g->o_w, NULL, dx, a->ao, w->o_w, N, H * D, C);
    lora_bwd(c, l, w, g, OS_LORA_O, os_matf(a->ao, N, H * D, H * D), a, os_matf(dx, N, C, C), c->dao);
    os_k->attention_bwd(c->dq, c->dk, c->dv, c->dao, a->q, a->k, a->v, a->ao, a->att, c->keymask, c->seg, 1, c->B,
                        c->L, H, KH, D, 0);
    rope(c, c->dq, c->dk, 1);
    os_linear_bwd_set_t(c->dln, g->q_w, g->q_b, c->dq, ln1, w->q_w, N, C, H * D);
    os_linear_bwd_t(c->dln, g->k_w, g->k_b, c->dk, ln1, w->k_w, N, C, KH * D);
    os_linear_bwd_t(c->dln, g->v_w, g->v_b, c->dv, ln1, w->v_w, N, C, KH * D);
    lora_bwd(c, l, w, g, OS_LORA_Q, ln1, a, os_matf(c->dq, N, H * D, H * D), c->dln);
    lora_bwd(c, l, w, g, OS_LORA_K, ln1, a, os_matf(c->dk, N, KH * D, KH * D), c->dln);
    lora_bwd(c, l, w, g, OS_LORA_V, ln1, a, os_matf(c->dv, N, KH * D, KH * D), c->dln);
    os_k->rmsnorm_bwd(dx, g->ln1, c->dln, x, w->ln1.data, a->rstd1, N, C);   // dx = dL/dx
}
