#include "train/step.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "model/forward.h"
#include "model/loss.h"
#include "session/model_runtime.h"
#include "session/speech.h"
#include "train/head_balance.h"
#include "zero/comm.h"
#include <stdio.h>
#include <string.h>

uint64_t os_lora_dropout_key(uint64_t seed, int64_t step, int64_t g) {
    return os_rng_u64(os_rng_u64(seed ^ 0x10AD0D0FULL, (uint64_t)step), (uint64_t)g);
}

// whether anything below the head is trained, so dL/dx must flow down (same answer on every rank)
static int trains_below_head(const os_trainer *t) {
    const os_model *m = t->m;
    const os_bucket *k = m->reg.b;
    int any = k[m->b_norm].trainable || k[m->b_embed].trainable || (t->speech && k[m->b_proj].trainable);
    for (int64_t l = 0; l < m->nlayers; l++) any |= k[m->b_layer[l]].trainable || (m->b_lora && k[m->b_lora[l]].trainable);
    return any;
}

// the runtime's gradients as the model's backward reaches them (model/weights.h): a close adds the parameter loss
// terms over the bucket (design invariant 5) before the runtime closes it; their values are read at the end of
// the micro-batch, bucket by bucket in the order applied (terms)
typedef struct {
    os_trainer *t;
    int *terms, nterms, cap;   // the buckets whose terms were applied, in order
} grad_ctx;

static void apply_terms(grad_ctx *g, int b) {
    if (!g->t->nterms) return;
    os_apply_param_terms(g->t, b);
    if (g->nterms == g->cap) {
        int *more = os_alloc(sizeof(int) * (size_t)(2 * g->cap + 8), "parameter term order");
        if (g->nterms) memcpy(more, g->terms, sizeof(int) * (size_t)g->nterms);
        os_free(g->terms);
        g->terms = more, g->cap = 2 * g->cap + 8;
    }
    g->terms[g->nterms++] = b;
}

// the micro-batch's one wait for its kernels: the loss sums and the parameter terms' values to the host
static void read_scalars(os_trainer *t, grad_ctx *g, os_step_stats *st) {
    os_loss_sums ls;
    os_loss_read(&t->acts->loss, &ls);
    memcpy(st->sum, ls.sum, sizeof ls.sum), memcpy(st->correct, ls.correct, sizeof ls.correct);
    memcpy(st->count, ls.count, sizeof ls.count);
    if (!g->nterms) return;
    int64_t n = (int64_t)t->m->reg.np * t->nterms;
    double *vals = os_alloc(sizeof(double) * (size_t)n, "parameter term sums (host)");
    os_k->download(vals, t->term_vals, (int64_t)sizeof(double) * n);
    for (int i = 0; i < g->nterms; i++) st->term_loss += os_param_terms_value(t, g->terms[i], vals);
    os_free(vals);
}

static void grad_open(void *ctx, int b) { zr_grad_open(((grad_ctx *)ctx)->t->rt, b); }
static void grad_close(void *ctx, int b) {
    grad_ctx *g = ctx;
    apply_terms(g, b);
    zr_grad_close(g->t->rt, b);
}
static float *grad_at(void *ctx, int pid, const char *caller) { return zr_grad_at(((grad_ctx *)ctx)->t->rt, pid, caller); }

void os_train_micro(os_trainer *t, const os_batch *b, float dscale, os_step_stats *st) {
    os_model *m = t->m;
    int64_t N = b->B * b->L, nl = m->nlayers;
    memset(st, 0, sizeof *st);
    for (int64_t i = 0; i < N; i++) st->tokens += b->keymask[i];

    // the speech positions' projector outputs and their gradients: each sample's first row in them
    int64_t *proj_at = os_alloc(sizeof(int64_t) * (size_t)(b->B + 1), "projector rows");
    for (int64_t bi = 0; bi < b->B; bi++) proj_at[bi] = os_speech_proj_row(t->speech, bi);
    os_model_input in = {.B = b->B, .R = b->R, .L = b->L, .ids = b->ids, .keymask = b->keymask, .seg = b->seg,
                         .pos = b->pos, .speech = b->speech, .proj = t->speech ? t->speech->proj : NULL,
                         .dproj = t->speech ? t->speech->dproj : NULL, .proj_at = proj_at};
    os_weights w = os_runtime_weights(t->rt);
    grad_ctx gc = {.t = t};
    os_grads g = {.ctx = &gc, .open = grad_open, .close = grad_close, .grad = grad_at};
    int fo = t->forward_only, below = !fo && trains_below_head(t);
    os_model_opts o = fo ? t->eval_opts : t->train_opts;   // the run's, built once
    o.grads = fo ? NULL : &g, o.lora_key = t->lora_key;

    os_ops_count_phase(OS_PHASE_FORWARD);   // (the seam's calls counted per part: OMNISHARD_COUNT_OPS)
    if (t->speech) os_speech_fwd(t->speech, &w);   // encoder + projector, on every rank (fixed schedule)
    os_model_forward(t->acts, &in, &w, &o);
    os_ops_count_phase(OS_PHASE_LOSS);
    // the loss over the final norm's output; its rows computed here or, balanced (--head_balance), beside other
    // ranks' rows: the ranks' exchange is two steps of its own around the compute (train/head_balance.h)
    os_loss *L = &t->acts->loss;
    os_loss_rows r;
    os_loss_open(L, &w, o.grads, N, below, t->dump_logits);
    os_loss_targets(L, b->labels, b->B, b->R, b->L, dscale, t->acts->hn, t->acts->dhn, &r);
    if (comm_size() > 1 && t->head_balance) {
        double cost[OS_LOSS_NCLS];
        os_loss_row_costs(L, cost);
        os_loss_rows here;   // this rank's kept rows and those moved to it
        os_head_exch *x = os_head_out(&r, cost, N, m->C, L->dh, &here);
        os_loss_compute(L, &here);
        st->head_moved = os_head_back(x);   // the moved rows' sums and dL/dhn back at r
    } else os_loss_compute(L, &r);
    os_loss_close(L, &w, o.grads, t->acts->dhn);
    os_ops_count_phase(OS_PHASE_BACKWARD);
    if (below) {
        os_model_backward(t->acts, &in, &w, &o);
        if (t->speech) os_speech_bwd(t->speech, &w, &g);   // projector gradients from dproj (+ its terms at the close)
    } else if (!fo) {
        // nothing trained below the head: no further backward (no bucket is gathered for it on any rank); parameter
        // terms over the frozen buckets below still have their values (and no gradient)
        for (int64_t l = 0; l < nl; l++) apply_terms(&gc, m->b_layer[l]);
        for (int64_t l = 0; m->b_lora && l < nl; l++) apply_terms(&gc, m->b_lora[l]);
        apply_terms(&gc, m->b_embed);
        if (t->speech) os_speech_bwd(t->speech, &w, &g);
    }
    os_ops_count_phase(OS_PHASE_OTHER);
    read_scalars(t, &gc, st);
    for (int k = 0; k <= m->oc.G; k++)
        if (st->count[k] > 0) st->loss += m->oc.loss_w[k] * st->sum[k] / (double)st->count[k];
    os_free(proj_at), os_free(gc.terms);
}
