#include "train/head.h"
#include "core/alloc.h"
#include "kernels/kernels.h"
#include <string.h>

// shifted targets of loss term k (0 = text, 1+i = audio layer i) for every row: [N]
static int32_t *targets(const os_model *m, const os_batch *b, int k, int64_t *count) {
    int64_t L = b->L, R = b->R, G = m->oc.G;
    int64_t row = k == 0 ? (G > 0 ? G : 0) : k - 1;
    int32_t *y = os_alloc(sizeof(int32_t) * (size_t)(b->B * L), "targets");
    *count = 0;
    for (int64_t bi = 0; bi < b->B; bi++)
        for (int64_t p = 0; p < L; p++) {
            int32_t v = p + 1 < L ? b->labels[(bi * R + row) * L + p + 1] : -100;
            y[bi * L + p] = v;
            *count += v != -100;
        }
    return y;
}

void os_head_fwd_bwd(os_trainer *t, const os_batch *b, const float *x, float *dx, float dscale, os_step_stats *st) {
    const os_model *m = t->m;
    zr_runtime *rt = t->rt;
    int64_t N = b->B * b->L, C = m->C, V = m->V, G = m->oc.G, T = m->oc.text_vocab, A = m->oc.audio_vocab;
    int nterms = (int)G + 1, fo = t->forward_only;   // fo: losses only (no gradient scope, no backward)
    int dh = !fo && dx;                              // dL/dx wanted (something below the head is trained)
    int64_t Va = G > 0 ? (m->oc.layershift ? G : 1) * A : 0;   // logit columns after T that a loss reads

    // final norm forward
    float *hn = os_alloc(sizeof(float) * (size_t)(N * C), "final norm out");
    float *rstd = os_alloc(sizeof(float) * (size_t)N, "final norm rstd");
    zr_gather(rt, m->b_norm);
    k_rmsnorm_fwd(hn, rstd, x, zr_param(rt, m->final_norm), N, C, (float)m->cfg.rms_norm_eps);

    int32_t *y[OS_MAX_G + 1];
    float scale[OS_MAX_G + 1];
    for (int k = 0; k < nterms; k++) {
        y[k] = targets(m, b, k, &st->count[k]);
        scale[k] = st->count[k] && !fo ? dscale * m->oc.loss_w[k] / (float)st->count[k] : 0.0f;
    }

    zr_gather(rt, m->b_head);
    if (!fo) zr_grad_open(rt, m->b_head);
    const float *W = zr_param(rt, m->lm_head);
    float *dW = fo ? NULL : zr_grad(rt, m->lm_head);
    int ad = m->b_adapter >= 0;
    const float *Wa = NULL, *ba = NULL;
    float *dWa = NULL, *dba = NULL;
    if (ad) {
        zr_gather(rt, m->b_adapter);
        if (!fo) zr_grad_open(rt, m->b_adapter);
        Wa = zr_param(rt, m->adapter_w), ba = zr_param(rt, m->adapter_b);
        if (!fo) dWa = zr_grad(rt, m->adapter_w), dba = zr_grad(rt, m->adapter_b);
    }
    // lm_head trained on rows [row0, V) only (--trainable_embed_rows, docs/training.md "Freezing"): the rest of its
    // gradient would be dropped, so it is not computed
    int64_t row0 = 0;
    if (dW) {
        const os_bucket *hb = &rt->reg->b[m->b_head];
        int64_t off = rt->reg->p[m->lm_head].offset;
        row0 = hb->train_lo > off ? (hb->train_lo - off) / C : 0;
    }
    int64_t rows = k_xent_chunk_rows(V, N);
    float *logits = os_alloc(sizeof(float) * (size_t)(rows * V), "logits chunk");
    float *al = ad ? os_alloc(sizeof(float) * (size_t)(rows * G * A), "adapter logits") : NULL;
    float *dA = ad && !fo ? os_alloc(sizeof(float) * (size_t)(rows * A), "adapter input grad") : NULL;
    float *dhn = dh ? os_alloc(sizeof(float) * (size_t)(N * C), "final norm grad") : NULL;

    for (int64_t r0 = 0; r0 < N; r0 += rows) {
        int64_t n = N - r0 < rows ? N - r0 : rows;
        const float *h = hn + r0 * C;
        k_linear_fwd(logits, h, W, NULL, n, C, V);                        // logits[n, V]
        if (t->dump_logits) memcpy(t->dump_logits + r0 * V, logits, sizeof(float) * (size_t)(n * V));
        // text: columns [0, T)
        st->sum[0] += k_xent_fwd_bwd(logits, V, y[0] + r0, n, T, scale[0], &st->correct[0]);
        if (!ad) {   // G = 1, or layer shift: layer g = columns [T + g*A, T + (g+1)*A) (slam_model_s2s.py:262)
            for (int64_t g = 0; g < G; g++)
                st->sum[1 + g] += k_xent_fwd_bwd(logits + T + g * A, V, y[1 + g] + r0, n, A, scale[1 + g], &st->correct[1 + g]);
        } else {
            // adapter: al[n, G*A] = logits[:, T:T+A] @ Wa^T + ba, layer i = al[:, i*A:(i+1)*A]
            k_gemm(0, 1, n, G * A, A, 1.0f, logits + T, V, Wa, A, 0.0f, al, G * A);
            for (int64_t i = 0; i < n; i++) k_add(al + i * G * A, al + i * G * A, ba, G * A);
            for (int64_t g = 0; g < G; g++)
                st->sum[1 + g] += k_xent_fwd_bwd(al + g * A, G * A, y[1 + g] + r0, n, A, scale[1 + g], &st->correct[1 + g]);
        }
        if (fo) continue;   // forward only: the losses are all (the xent kernels wrote zero gradients in place)
        if (ad) {
            // backward through the adapter: dA = dal @ Wa, dWa += dal^T @ a, dba += colsum(dal)
            if (dWa) k_gemm(1, 0, G * A, A, n, 1.0f, al, G * A, logits + T, V, 1.0f, dWa, A);
            for (int64_t i = 0; dba && i < n; i++) k_add(dba, dba, al + i * G * A, G * A);
            k_gemm(0, 0, n, A, G * A, 1.0f, al, G * A, Wa, A, 0.0f, dA, A);
            for (int64_t i = 0; i < n; i++) memcpy(logits + i * V + T, dA + i * A, sizeof(float) * (size_t)A);
        }
        for (int64_t i = 0; i < n && T + Va < V; i++)    // columns no loss reads
            memset(logits + i * V + T + Va, 0, sizeof(float) * (size_t)(V - T - Va));
        // lm_head backward: dh = dlogits @ W, dW += dlogits^T @ h
        if (dh) memset(dhn + r0 * C, 0, sizeof(float) * (size_t)(n * C));
        k_linear_bwd(dh ? dhn + r0 * C : NULL, NULL, NULL, logits, h, W, n, C, V);
        if (dW) k_gemm(1, 0, V - row0, C, n, 1.0f, logits + row0, V, h, C, 1.0f, dW + row0 * C, C);   // dW[row0:] += dlogits^T h
    }
    os_free(logits), os_free(al), os_free(dA);
    for (int k = 0; k < nterms; k++) os_free(y[k]);

    if (ad) {
        if (!fo) {
            st->term_loss += os_apply_param_terms(t, m->b_adapter);
            zr_grad_close(rt, m->b_adapter);
        }
        zr_release(rt, m->b_adapter);
    }
    if (!fo && m->b_head != m->b_embed) {   // untied: done; tied: the embedding backward closes it
        st->term_loss += os_apply_param_terms(t, m->b_head);
        zr_grad_close(rt, m->b_head);
    }
    zr_release(rt, m->b_head);

    // final norm backward
    if (dh) {
        zr_grad_open(rt, m->b_norm);
        memset(dx, 0, sizeof(float) * (size_t)(N * C));
        k_rmsnorm_bwd(dx, zr_grad(rt, m->final_norm), dhn, x, zr_param(rt, m->final_norm), rstd, N, C);
        st->term_loss += os_apply_param_terms(t, m->b_norm);
        zr_grad_close(rt, m->b_norm);
    }
    zr_release(rt, m->b_norm);
    os_free(hn), os_free(rstd), os_free(dhn);
}
