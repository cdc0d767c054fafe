#include "train/step.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "train/head.h"
#include "train/layer.h"
#include "train/speech.h"
#include <stdio.h>
#include <string.h>

int os_batch_check(const os_model *m, const os_batch *b) {
    int64_t G = m->oc.G, R = G > 0 ? G + 1 : 1, T = m->oc.text_vocab, A = m->oc.audio_vocab;
    if (b->R != R) return os_errf("batch has %lld rows per sample, the model needs %lld (G+1)", (long long)b->R, (long long)R);
    for (int64_t bi = 0; bi < b->B; bi++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t p = 0; p < b->L; p++) {
                int64_t i = (bi * R + r) * b->L + p;
                int32_t id = b->ids[i], lb = b->labels[i];
                if (id < 0 || id >= m->V)
                    return os_errf("sample %lld row %lld position %lld: input id %d outside the vocabulary [0, %lld)",
                                   (long long)bi, (long long)r, (long long)p, id, (long long)m->V);
                int64_t lim = (G > 0 && r < G) ? A : T;
                if (lb != -100 && (lb < 0 || lb >= lim))
                    return os_errf("sample %lld row %lld position %lld: label %d outside [0, %lld) (or -100)",
                                   (long long)bi, (long long)r, (long long)p, lb, (long long)lim);
            }
    return 0;
}

// x0[B*L, C] = mean over the R rows of embed[ids]. Speech splice (docs/speech.md): at the j-th speech position
// of a sample every audio row's embedding is replaced by its projector output proj[j], so
// x0 = (G * proj[j] + E[text id]) / (G+1).
static void embed_fwd(os_trainer *t, const os_batch *b, float *x0) {
    os_model *m = t->m;
    int64_t L = b->L, C = m->C, R = b->R;
    const float *E = zr_param(t->rt, m->embed);
    for (int64_t bi = 0; bi < b->B; bi++) {
        for (int64_t r = 0; r < R; r++)
            (r ? k_embedding_acc : k_embedding_fwd)(x0 + bi * L * C, b->ids + (bi * R + r) * L, E, L, C, 1.0f / (float)R);
        const float *proj = os_speech_proj(t->speech, bi);
        for (int64_t p = 0, j = 0; proj && p < L; p++) {
            if (!b->speech[bi * L + p]) continue;
            float *x = x0 + (bi * L + p) * C;
            k_embedding_fwd(x, b->ids + (bi * R + R - 1) * L + p, E, 1, C, 1.0f / (float)R);
            k_axpy(x, (float)(R - 1) / (float)R, proj + C * j++, C);
        }
    }
}

// embedding gradient of the R rows; at speech positions the audio rows get none and the projector output gets
// dproj[j] = dx0 * G/(G+1). A frozen embedding (dE NULL) gets nothing.
static void embed_bwd(os_trainer *t, const os_batch *b, const float *dx0) {
    os_model *m = t->m;
    int64_t L = b->L, C = m->C, R = b->R;
    float *dE = zr_grad(t->rt, m->embed);
    for (int64_t bi = 0; bi < b->B; bi++) {
        const int32_t *ids = b->ids + bi * R * L;
        const float *dx = dx0 + bi * L * C;
        float *dproj = os_speech_dproj(t->speech, bi);
        if (!dproj) {
            for (int64_t r = 0; dE && r < R; r++) k_embedding_bwd(dE, ids + r * L, dx, L, C, 1.0f / (float)R);
            continue;
        }
        if (dE) k_embedding_bwd(dE, ids + (R - 1) * L, dx, L, C, 1.0f / (float)R);
        const uint8_t *sp = b->speech + bi * L;
        for (int64_t p = 0, j = 0; p < L; p++) {   // runs of non-speech positions for the audio rows
            if (sp[p]) {
                memset(dproj + C * j, 0, sizeof(float) * (size_t)C);
                k_axpy(dproj + C * j++, (float)(R - 1) / (float)R, dx + p * C, C);
                continue;
            }
            int64_t e = p;
            while (e < L && !sp[e]) e++;
            for (int64_t r = 0; dE && r < R - 1; r++) k_embedding_bwd(dE, ids + r * L + p, dx + p * C, e - p, C, 1.0f / (float)R);
            p = e - 1;
        }
    }
}

uint64_t os_lora_dropout_key(uint64_t seed, int64_t step, int64_t g) {
    return os_rng_u64(os_rng_u64(seed ^ 0x10AD0D0FULL, (uint64_t)step), (uint64_t)g);
}

// a decoder layer's buckets: its own and its LoRA bucket (when the model has LoRA)
static void layer_gather(zr_runtime *rt, const os_model *m, int64_t l) {
    zr_gather(rt, m->b_layer[l]);
    if (m->b_lora) zr_gather(rt, m->b_lora[l]);
}
static void layer_release(zr_runtime *rt, const os_model *m, int64_t l) {
    zr_release(rt, m->b_layer[l]);
    if (m->b_lora) zr_release(rt, m->b_lora[l]);
}
static void layer_prefetch(zr_runtime *rt, const os_model *m, int64_t l) {
    zr_prefetch(rt, m->b_layer[l]);
    if (m->b_lora) zr_prefetch(rt, m->b_lora[l]);
}

// whether anything below the head is trained, so dL/dx must flow down (same answer on every rank)
static int trains_below_head(const os_trainer *t) {
    const os_model *m = t->m;
    const os_bucket *k = m->reg.b;
    int any = k[m->b_norm].trainable || k[m->b_embed].trainable || (t->speech && k[m->b_proj].trainable);
    for (int64_t l = 0; l < m->nlayers; l++) any |= k[m->b_layer[l]].trainable || (m->b_lora && k[m->b_lora[l]].trainable);
    return any;
}

void os_train_micro(os_trainer *t, const os_batch *b, float dscale, os_step_stats *st) {
    os_model *m = t->m;
    zr_runtime *rt = t->rt;
    int64_t N = b->B * b->L, C = m->C, nl = m->nlayers;
    memset(st, 0, sizeof *st);
    for (int64_t i = 0; i < N; i++) st->tokens += b->keymask[i];

    os_layer_ctx lc;
    os_layer_ctx_init(&lc, m, b, t->forward_only ? 0.0f : m->oc.lora.dropout);
    lc.lora_key = t->lora_key;
    // residual stream: xs[l] is the input of layer l, xs[nl] the last layer's output
    float **xs = os_alloc(sizeof(float *) * (size_t)(nl + 1), "layer inputs");
    for (int64_t l = 0; l <= nl; l++) xs[l] = os_alloc(sizeof(float) * (size_t)(N * C), "layer input");
    int64_t nacts = t->grad_ckpt || t->forward_only ? 1 : nl;   // activations kept for the backward
    os_layer_act *acts = os_alloc(sizeof(os_layer_act) * (size_t)nacts, "activations");
    for (int64_t l = 0; l < nacts; l++) os_layer_act_alloc(&acts[l], &lc);

    // ---- forward ----
    if (t->speech) os_speech_fwd(t->speech, rt);   // encoder + projector, on every rank (fixed schedule)
    zr_gather(rt, m->b_embed);
    embed_fwd(t, b, xs[0]);
    zr_release(rt, m->b_embed);
    if (nl > 0) layer_prefetch(rt, m, 0);
    for (int64_t l = 0; l < nl; l++) {
        if (l + 1 < nl) layer_prefetch(rt, m, l + 1);
        else zr_prefetch(rt, m->b_norm);
        layer_gather(rt, m, l);
        os_layer_fwd(&lc, (int)l, rt, xs[l], &acts[nacts == 1 ? 0 : l], xs[l + 1]);
        layer_release(rt, m, l);
    }

    // ---- head: final norm, fused lm_head + losses (forward and backward), norm backward ----
    int below = !t->forward_only && trains_below_head(t);
    float *dx = below ? os_alloc(sizeof(float) * (size_t)(N * C), "residual gradient") : NULL;
    os_head_fwd_bwd(t, b, xs[nl], dx, dscale, st);
    for (int k = 0; k <= m->oc.G; k++)
        if (st->count[k] > 0) st->loss += m->oc.loss_w[k] * st->sum[k] / (double)st->count[k];
    // evaluation, or nothing trained below the head: no further backward (no bucket is gathered for it on any rank);
    // parameter terms over the frozen buckets below still have their values (and no gradient)
    if (!below) {
        for (int64_t l = 0; !t->forward_only && l < nl; l++) st->term_loss += os_apply_param_terms(t, m->b_layer[l]);
        for (int64_t l = 0; !t->forward_only && m->b_lora && l < nl; l++) st->term_loss += os_apply_param_terms(t, m->b_lora[l]);
        if (!t->forward_only) st->term_loss += os_apply_param_terms(t, m->b_embed);
        if (!t->forward_only && t->speech) st->term_loss += os_speech_bwd(t->speech, t);
        goto done;
    }

    // ---- layers backward ----
    if (nl > 0) layer_prefetch(rt, m, nl - 1);
    for (int64_t l = nl - 1; l >= 0; l--) {
        if (l > 0) layer_prefetch(rt, m, l - 1);
        int bk = m->b_layer[l], bl = m->b_lora ? m->b_lora[l] : -1;
        layer_gather(rt, m, l);
        os_layer_act *a = &acts[nacts == 1 ? 0 : l];
        if (t->grad_ckpt) os_layer_fwd(&lc, (int)l, rt, xs[l], a, NULL);
        zr_grad_open(rt, bk);
        if (bl >= 0) zr_grad_open(rt, bl);
        os_layer_bwd(&lc, (int)l, rt, xs[l], a, dx);
        st->term_loss += os_apply_param_terms(t, bk);
        zr_grad_close(rt, bk);
        if (bl >= 0) {
            st->term_loss += os_apply_param_terms(t, bl);
            zr_grad_close(rt, bl);
        }
        layer_release(rt, m, l);
    }

    // ---- embedding backward (the embedding gradient scope is still open when lm_head is tied) ----
    zr_grad_open(rt, m->b_embed);
    embed_bwd(t, b, dx);
    st->term_loss += os_apply_param_terms(t, m->b_embed);
    zr_grad_close(rt, m->b_embed);
    if (m->b_head == m->b_embed) zr_grad_close(rt, m->b_embed);   // the scope opened by the head
    if (t->speech) st->term_loss += os_speech_bwd(t->speech, t);   // projector gradients from dproj

done:
    os_free(dx);
    for (int64_t l = 0; l < nacts; l++) os_layer_act_free(&acts[l]);
    os_free(acts);
    for (int64_t l = 0; l <= nl; l++) os_free(xs[l]);
    os_free(xs);
    os_layer_ctx_free(&lc);
}
