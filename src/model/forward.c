#include "model/forward.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/ids.h"
#include "kernels/ops.h"
#include "model/embed.h"
#include <string.h>

void os_kv_cache_init(os_kv_cache *kv, const os_model *m, int64_t B, int64_t cap) {
    *kv = (os_kv_cache){.nlayers = m->nlayers, .B = B, .cap = cap, .KH = m->KH, .D = m->D};
    size_t n = sizeof(float) * (size_t)(m->nlayers * B * cap * m->KH * m->D);
    kv->k = os_k->alloc((int64_t)n, "KV cache keys[layers, B, cap, KH, D]");   // the backend's memory
    kv->v = os_k->alloc((int64_t)n, "KV cache values[layers, B, cap, KH, D]");
}

void os_kv_cache_free(os_kv_cache *kv) {
    os_k->free(kv->k), os_k->free(kv->v);
    *kv = (os_kv_cache){0};
}

// a decoder layer's buckets: its own and its LoRA bucket (when the model has LoRA)
static void layer_prefetch(const os_weights *w, const os_model *m, int64_t l) {
    w->prefetch(w->ctx, m->b_layer[l]);
    if (m->b_lora) w->prefetch(w->ctx, m->b_lora[l]);
}
static void layer_gather(const os_weights *w, const os_model *m, int64_t l) {
    w->gather(w->ctx, m->b_layer[l]);
    if (m->b_lora) w->gather(w->ctx, m->b_lora[l]);
}
static void layer_release(const os_weights *w, const os_model *m, int64_t l) {
    w->release(w->ctx, m->b_layer[l]);
    if (m->b_lora) w->release(w->ctx, m->b_lora[l]);
}

// the final norm's bucket and the loss's (model/loss.h), announced while the last layer computes. lm_head only when
// it trains (train: a backward follows) and is at least as large as a layer's bucket: then its own gradient buffer,
// as large as lm_head, makes the loss the memory peak, and gathering lm_head next to the last layer adds nothing to
// it; otherwise (and in forward-only passes) only the final norm
static void head_prefetch(const os_weights *w, const os_model *m, int train) {
    const os_bucket *k = m->reg.b;
    w->prefetch(w->ctx, m->b_norm);
    if (!train || !k[m->b_head].trainable || k[m->b_layer[m->nlayers - 1]].numel > k[m->b_head].numel) return;
    w->prefetch(w->ctx, m->b_head);
    if (m->b_adapter >= 0) w->prefetch(w->ctx, m->b_adapter);
}

// layer l's weights (layer_weights, from w by os_weight) and gradients (layer_grads, from g by os_grad): each
// tensor of OS_LAYER_TENSORS and the targeted LoRA modules, resolved by their ids
#define RESOLVE_ONE(get, f) x.f = get(src, P->f);
#define LAYER_RESOLVER(name, T, S, get)                                                                          \
    static T name(const os_model *m, const S *src, int64_t l) {                                                \
        const os_layer_ids *P = &m->layer[l];                                                                   \
        T x = {0};                                                                                              \
        OS_LAYER_TENSORS(RESOLVE_ONE, get)                                                                      \
        for (int t = 0; t < OS_LORA_N; t++)                                                                     \
            if (P->lora_a[t] >= 0) x.lora_a[t] = get(src, P->lora_a[t]), x.lora_b[t] = get(src, P->lora_b[t]); \
        return x;                                                                                               \
    }
LAYER_RESOLVER(layer_weights, os_layer_weights, os_weights, os_weight_t)
LAYER_RESOLVER(layer_grads, os_layer_grads, os_grads, os_grad)
#undef LAYER_RESOLVER
#undef RESOLVE_ONE

// ids: in's ids on the backend (os_model_acts.ids)
static os_embed_task embed_task(const os_model *m, const os_model_input *in, const int32_t *ids) {
    return (os_embed_task){.B = in->B, .R = in->R, .L = in->L, .C = m->C, .ids = ids, .hids = in->ids,
                           .speech = in->speech, .proj = in->proj, .proj_at = in->proj_at};
}

static os_layer_act *act_of(os_model_acts *a, int64_t l) { return &a->acts[a->nacts == 1 ? 0 : l]; }

// the embedding forward: the table itself where the owner keeps it whole (w->resident: ZeRO 0-2), else only the
// rows the batch reads when the owner can fetch rows (w->rows: the ids renumbered into the fetched table, both on
// the backend), else the whole bucket gathered. ids: in's ids on the backend
static void embed_fwd(const os_model *m, const os_model_input *in, const int32_t *ids, const os_weights *w, float *x0) {
    os_embed_task et = embed_task(m, in, ids);
    const float *E = w->resident ? w->resident(w->ctx, m->embed) : NULL;
    if (E) {
        os_embed_fwd(&et, E, x0);
        return;
    }
    if (!w->rows) {
        w->gather(w->ctx, m->b_embed);
        os_embed_fwd(&et, os_weight(w, m->embed), x0);
        w->release(w->ctx, m->b_embed);
        return;
    }
    int64_t n = in->B * in->R * in->L, C = m->C;
    int32_t *u = os_alloc(sizeof(int32_t) * (size_t)(n ? n : 1), "embedding rows"), *local = os_alloc(sizeof(int32_t) * (size_t)(n ? n : 1), "embedding ids");
    memcpy(u, in->ids, sizeof(int32_t) * (size_t)n);
    int64_t nu = os_ids_unique(u, n);
    for (int64_t i = 0; i < n; i++) local[i] = (int32_t)os_ids_find(u, nu, in->ids[i]);
    float *table = os_k->alloc((int64_t)sizeof(float) * (nu ? nu : 1) * C, "embedding rows[rows, C]");   // rows fills it
    int32_t *dlocal = os_k->alloc((int64_t)sizeof(int32_t) * (n ? n : 1), "embedding ids (backend)");
    w->rows(w->ctx, m->embed, u, nu, table);
    os_k->upload(dlocal, local, (int64_t)sizeof(int32_t) * n);
    et.ids = dlocal, et.hids = local;
    os_embed_fwd(&et, table, x0);
    os_free(u), os_free(local), os_k->free(table), os_k->free(dlocal);
}

void os_model_forward(os_model_acts *a, const os_model_input *in, const os_weights *w, const os_model_opts *o) {
    const os_model *m = a->m;
    int64_t nl = m->nlayers, p0 = o->kv ? o->kv->len : 0, npos = o->kv ? o->kv->cap : in->L;
    OS_ASSERT(!o->kv || (!in->keymask && !in->seg && !in->pos && p0 + in->L <= o->kv->cap && in->B == o->kv->B && !o->grads));
    OS_ASSERT(!o->kvs || (!o->kv && !in->keymask && !in->seg && !in->pos && in->L == 1 && !o->grads));
    for (int64_t b = 0; o->kvs && b < in->B; b++) {
        OS_ASSERT(o->kvs[b]->B == 1 && o->kvs[b]->len < o->kvs[b]->cap);
        if (o->kvs[b]->cap > npos) npos = o->kvs[b]->cap;
    }
    os_act_shape sh = {.B = in->B, .L = in->L, .npos = npos, .train = o->grads != NULL,
                       .recompute = o->recompute, .rounds = o->grads && os_k->bf16 ? 2 : 0, .rowpos = in->pos != NULL};
    os_acts_prepare(a, &sh);
    if (in->pos) os_acts_positions(a, in->pos);
    os_acts_upload(a, in->R, in->ids, in->keymask, in->seg);   // the host inputs the kernels read, once
    os_layer_ctx *c = &a->ctx;
    c->m = m, c->B = in->B, c->L = in->L, c->N = in->B * in->L, c->p0 = p0, c->cos_t = a->cos_t, c->sin_t = a->sin_t;
    c->rope_ld = in->pos ? in->L * m->D / 2 : 0;
    c->keymask = a->keymask, c->seg = a->seg, c->kv = o->kv, c->kvs = o->kvs, c->lora_p = o->lora_dropout,
    c->lora_key = o->lora_key;

    embed_fwd(m, in, a->ids, w, a->xs[0]);
    if (nl > 0) layer_prefetch(w, m, 0);
    for (int64_t l = 0; l < nl; l++) {
        if (l + 1 < nl) layer_prefetch(w, m, l + 1);
        else head_prefetch(w, m, o->grads != NULL);
        layer_gather(w, m, l);
        os_layer_weights lw = layer_weights(m, w, l);
        os_layer_fwd(c, (int)l, &lw, a->xs[l], act_of(a, l), a->xs[l + 1]);
        layer_release(w, m, l);
    }
    a->live = a->nacts == 1 && nl > 0 ? nl - 1 : -1;   // the shared set holds the last layer's activations
    w->gather(w->ctx, m->b_norm);
    os_k->rmsnorm_fwd(a->hn, a->rstd, a->xs[nl], NULL, os_weight(w, m->final_norm), c->N, m->C,
                      (float)m->cfg.rms_norm_eps);
    w->release(w->ctx, m->b_norm);
    if (o->kv) o->kv->len += in->L;
    for (int64_t b = 0; o->kvs && b < in->B; b++) o->kvs[b]->len++;
}

void os_model_backward(os_model_acts *a, const os_model_input *in, const os_weights *w, const os_model_opts *o) {
    const os_model *m = a->m;
    const os_grads *g = o->grads;
    int64_t nl = m->nlayers;
    const os_layer_ctx *c = &a->ctx;
    w->gather(w->ctx, m->b_norm);   // the final norm, from the loss's dL/dhn into dx
    g->open(g->ctx, m->b_norm);
    os_k->zero(a->dx, c->N * m->C);
    os_k->rmsnorm_bwd(a->dx, os_grad(g, m->final_norm), a->dhn, a->xs[nl], os_weight(w, m->final_norm), a->rstd, c->N, m->C);
    g->close(g->ctx, m->b_norm);
    w->release(w->ctx, m->b_norm);
    if (nl > 0) layer_prefetch(w, m, nl - 1);
    for (int64_t l = nl - 1; l >= 0; l--) {
        if (l > 0) layer_prefetch(w, m, l - 1);
        int bk = m->b_layer[l], bl = m->b_lora ? m->b_lora[l] : -1;
        layer_gather(w, m, l);
        os_layer_weights lw = layer_weights(m, w, l);
        os_layer_act *act = act_of(a, l);
        // recomputation: every layer's forward again but the last one's, whose activations the shared set still
        // holds from the forward (nothing writes them in between; recomputed, they come out bitwise the same)
        if (o->recompute && l != a->live) os_layer_fwd(c, (int)l, &lw, a->xs[l], act, NULL);
        a->live = -1;
        g->open(g->ctx, bk);
        if (bl >= 0) g->open(g->ctx, bl);
        os_layer_grads lg = layer_grads(m, g, l);
        os_layer_bwd(c, (int)l, &lw, &lg, a->xs[l], act, a->dx);
        g->close(g->ctx, bk);
        if (bl >= 0) g->close(g->ctx, bl);
        layer_release(w, m, l);
    }
    // embedding (tied lm_head: its gradient scope is still open from the head, and this close is its last)
    os_embed_task et = embed_task(m, in, a->ids);   // the ids the forward uploaded
    if (m->b_head != m->b_embed) g->open(g->ctx, m->b_embed);
    os_embed_bwd(&et, in->dproj, a->dx, os_grad(g, m->embed));
    g->close(g->ctx, m->b_embed);
}
