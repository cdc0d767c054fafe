#include "model/head.h"
#include "model/head_run.h"
#include "core/alloc.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include <string.h>

// shifted targets of loss term k (0 = text, 1+i = audio layer i) for every row into y[N]; returns their count
static int64_t targets(const os_model *m, const os_head_task *t, int k, int32_t *y) {
    int64_t L = t->L, R = t->R, G = m->oc.G, count = 0;
    int64_t row = k == 0 ? (G > 0 ? G : 0) : k - 1;
    for (int64_t bi = 0; bi < t->B; bi++)
        for (int64_t p = 0; p < L; p++) {
            int32_t v = p + 1 < L ? t->labels[(bi * R + row) * L + p + 1] : -100;
            y[bi * L + p] = v;
            count += v != -100;
        }
    return count;
}

void os_head_norm_fwd(const os_model *m, const float *norm, const float *x, int64_t N, os_head_buf *buf) {
    os_k->rmsnorm_fwd(buf->hn, buf->rstd, x, norm, N, m->C, (float)m->cfg.rms_norm_eps);
}

// each sample's last row of lm_head logits into out[B, V] (inference)
static void last_logits(const os_model *m, const float *W, const os_head_task *t, const os_head_buf *buf) {
    for (int64_t b = 0; b < t->B; b++)
        os_k->linear_fwd(t->logits + b * m->V, buf->hn + (b * t->L + t->L - 1) * m->C, W, NULL, 1, m->C, m->V);
}

int64_t os_head_stash_rows(const os_model *m, int64_t N) {
    int64_t rows = k_xent_chunk_rows(m->V, N), k = (OS_HEAD_STASH_K + rows - 1) / rows * rows;
    int wgrad = m->reg.b[m->b_head].trainable || (m->b_adapter >= 0 && m->reg.b[m->b_adapter].trainable);
    if (!wgrad) k = rows;   // no weight gradient to gather rows for: each chunk's own rows (dh, dA)
    return k < N ? k : N;
}

// Row classes: which loss terms a row has targets in, and so which lm_head columns [c0, c1) it needs. The text
// cross-entropy reads columns [0, T), the audio ones [T, V) (V = T + A through the adapter, or T + G*A with the
// layer shift, layer g its own A columns: model/omni.c sizes V so, so every column is read by some loss). A row
// without a text target never needs the 152000 text columns, one without an audio target neither the audio columns
// nor the adapter (in SLAM-Omni: most answer positions are past the text's eot, audio only). Rows are grouped by
// class (text and audio, text only, audio only: OS_HEAD_CLS_* in head_balance.h, CLS_* in head_run.h), then
// computed in chunks.

// the cross-entropy of loss term k over rows [r0, r0 + n), lg their `ncols` logits (row stride ld), each owner's
// rows with its scale into its sums
static void seg_xent(head_run *h, int k, float *lg, int64_t ld, int64_t r0, int64_t n, int64_t ncols) {
    int64_t start = 0;
    for (int i = 0; i < h->nseg && start < r0 + n; start = h->seg[i++].end) {
        const head_seg *q = &h->seg[i];
        int64_t a = r0 > start ? r0 : start, b = r0 + n < q->end ? r0 + n : q->end;
        if (a < b)
            q->s->sum[k] += os_k->xent_fwd_bwd(lg + (a - r0) * ld, ld, h->y[k] + a, b - a, ncols, q->scale[k],
                                               &q->s->correct[k]);
    }
}

// bf16 training: the stash (head.h) holds the rounded gradients of rows [first, first + n), all of one class
// (columns [c0, c1), stash row stride c1 - c0); the products of those rows, one each: dhn[rows] = dlogits @
// W[c0:c1] (W packed once for all of them, not once per chunk), dW[max(row0, c0):c1] += dlogits^T hn, dWa +=
// dal^T a
static void stash_flush(head_run *h, int64_t c0, int64_t c1) {
    const os_model *m = h->m;
    const os_head_buf *buf = h->buf;
    int64_t C = m->C, A = m->oc.audio_vocab, GA = m->oc.G * A, w = c1 - c0, d0 = h->row0 > c0 ? h->row0 : c0;
    if (!h->n) return;
    if (h->dh)
        os_k->gemm_rounded(OS_PRE_A, 0, 0, h->n, C, w, 1.0f, buf->dls, w, h->W + c0 * C, C, 0.0f,
                           h->dhn + h->first * C, C);
    if (h->dW && d0 < c1)
        os_k->gemm_rounded(OS_PRE_A, 1, 0, c1 - d0, C, h->n, 1.0f, (const char *)buf->dls + (d0 - c0) * h->e, w,
                           h->hn + h->first * C, C, 1.0f, h->dW + d0 * C, C);
    if (h->dWa && c1 > m->oc.text_vocab)
        os_k->gemm_rounded(OS_PRE_A | OS_PRE_B, 1, 0, GA, A, h->n, 1.0f, buf->als, GA, buf->ain, A, 1.0f, h->dWa, A);
    h->first += h->n, h->n = 0;
}

// the stash row where the next chunk starts, in buffer b of w elements per row
static void *stash_row(const head_run *h, void *b, int64_t w) { return (char *)b + h->n * w * h->e; }

// the class of row r by its targets
static int row_class(const head_run *h, int64_t r) {
    int text = h->y[0][r] != -100, audio = 0;
    for (int k = 1; k < h->nterms && !audio; k++) audio = h->y[k][r] != -100;
    return text ? (audio ? CLS_TA : CLS_T) : audio ? CLS_A : NCLS;
}

// Rows with a target moved to the front of hn and of the targets y, grouped by class (in order within one),
// idx[i] the original row of row i; ncls[c] the rows of class c; returns their count. A row with no target adds
// nothing to any loss or gradient and is skipped (in SLAM-Omni: the speech input and the prompt). The logits
// buffer (at least [N, C], activations.c) is the scratch.
static int64_t order_rows(head_run *h, int64_t N, int64_t *idx, int64_t ncls[NCLS]) {
    int64_t C = h->m->C, n = 0;
    float *tmp = h->buf->logits;
    for (int c = 0; c < NCLS; c++) {
        ncls[c] = 0;
        for (int64_t r = 0; r < N; r++)
            if (row_class(h, r) == c) idx[n++] = r, ncls[c]++;
    }
    for (int64_t i = 0; i < n; i++) os_k->copy(tmp + i * C, h->buf->hn + idx[i] * C, C);
    os_k->copy(h->buf->hn, tmp, n * C);
    int32_t *yt = (int32_t *)tmp;
    for (int k = 0; k < h->nterms; k++) {
        for (int64_t i = 0; i < n; i++) yt[i] = h->y[k][idx[i]];
        memcpy(h->y[k], yt, sizeof(int32_t) * (size_t)n);
    }
    return n;
}

// dhn's ordered rows [0, n) back to their rows idx[i], the skipped rows zero (the logits buffer is the scratch)
static void expand_dh(const head_run *h, const int64_t *idx, int64_t n, int64_t N) {
    int64_t C = h->m->C;
    float *dhn = h->buf->dhn, *tmp = h->buf->logits;
    os_k->copy(tmp, dhn, n * C);
    os_k->zero(dhn, N * C);
    for (int64_t i = 0; i < n; i++) os_k->copy(dhn + idx[i] * C, tmp + i * C, C);
}

// the audio losses of a chunk of n rows at row r0, la [n, *] (stride V) its audio columns: through the adapter
// (al[n, G*A] = la[:, :A] @ Wa^T + ba, layer i = al[:, i*A:(i+1)*A]) or, without it, layer g's own columns
// [g*A, (g+1)*A) (G = 1, or the layer shift: slam_model_s2s.py:262)
static void audio_fwd(head_run *h, int64_t r0, int64_t n, float *la) {
    const os_model *m = h->m;
    os_head_buf *buf = h->buf;
    int64_t V = m->V, G = m->oc.G, A = m->oc.audio_vocab, GA = G * A;
    float *al = buf->al;
    if (!h->Wa) {
        for (int k = 0; k < G; k++) seg_xent(h, 1 + k, la + k * A, V, r0, n, A);
        return;
    }
    if (h->e) {   // the adapter's input rounded into the stash: the forward and dWa read it
        void *ar = stash_row(h, buf->ain, A);
        os_k->gemm_round(ar, la, n, A, V);
        os_k->gemm_rounded(OS_PRE_A, 0, 1, n, GA, A, 1.0f, ar, A, h->Wa, A, 0.0f, al, GA);
    } else
        os_k->gemm(0, 1, n, GA, A, 1.0f, la, V, h->Wa, A, 0.0f, al, GA);
    for (int64_t i = 0; i < n; i++) os_k->add(al + i * GA, al + i * GA, h->ba, GA);
    for (int k = 0; k < G; k++) seg_xent(h, 1 + k, al + k * A, GA, r0, n, A);
}

// backward through the adapter into la's first A columns: dA = dal @ Wa, dWa += dal^T @ a, dba += colsum(dal)
static void adapter_bwd(head_run *h, int64_t n, float *la) {
    const os_model *m = h->m;
    os_head_buf *buf = h->buf;
    int64_t V = m->V, A = m->oc.audio_vocab, GA = m->oc.G * A;
    float *al = buf->al, *dA = buf->dA;
    for (int64_t i = 0; h->dba && i < n; i++) os_k->add(h->dba, h->dba, al + i * GA, GA);
    if (h->e) {   // dal rounded once: dA now, dWa with the stash
        void *dr = stash_row(h, buf->als, GA);
        os_k->gemm_round(dr, al, n, GA, GA);
        os_k->gemm_rounded(OS_PRE_A, 0, 0, n, A, GA, 1.0f, dr, GA, h->Wa, A, 0.0f, dA, A);
    } else {
        if (h->dWa) os_k->gemm(1, 0, GA, A, n, 1.0f, al, GA, la, V, 1.0f, h->dWa, A);
        os_k->gemm(0, 0, n, A, GA, 1.0f, al, GA, h->Wa, A, 0.0f, dA, A);
    }
    for (int64_t i = 0; i < n; i++) os_k->copy(la + i * V, dA + i * A, A);
}

// the rows of the next of k equal chunks over `left` rows (0 when k = 0)
static int64_t share(int64_t left, int64_t k) { return k > 0 ? (left + k - 1) / k : 0; }

// One chunk: rows [r0, r0 + n), all of one class, lm_head columns [c0, c1) (c0 = 0: the text columns are among
// them; c1 > T: the audio ones). The logits buffer holds them at stride V, column c0 first. next: the rows of the
// class's next chunk (0: this is its last).
static void head_chunk(head_run *h, int64_t r0, int64_t n, int64_t c0, int64_t c1, int64_t next) {
    const os_model *m = h->m;
    os_head_buf *buf = h->buf;
    int64_t C = m->C, V = m->V, T = m->oc.text_vocab, w = c1 - c0;
    int text = c0 == 0, audio = c1 > T && m->oc.G > 0;
    const float *hr = h->hn + r0 * C;
    float *lg = buf->logits, *la = lg + (T - c0);   // la: the audio columns (c0 <= T)
    os_k->gemm(0, 1, n, w, C, 1.0f, hr, C, h->W + c0 * C, C, 0.0f, lg, V);   // logits[n, c0:c1]
    if (h->t->logits) os_k->copy(h->t->logits + r0 * V, lg, n * V);   // every row, every column (w = V)
    if (!h->nterms) return;
    if (text) seg_xent(h, 0, lg, V, r0, n, T);
    if (audio) audio_fwd(h, r0, n, la);
    if (!h->bw) return;   // forward only: the losses are all (the xent kernels wrote zero gradients in place)
    if (audio && h->Wa) adapter_bwd(h, n, la);
    // lm_head backward: dh = dlogits @ W[c0:c1], dW[d0:c1] += dlogits[:, d0:]^T h
    if (h->e) {   // dlogits rounded once: dh and dW with the stash
        if (h->dh || h->dW) os_k->gemm_round(stash_row(h, buf->dls, w), lg, n, w, V);
        h->n += n;
        if (!next || h->n + next > h->srows) stash_flush(h, c0, c1);
        return;
    }
    int64_t d0 = h->row0 > c0 ? h->row0 : c0;
    if (h->dh) os_k->gemm(0, 0, n, C, w, 1.0f, lg, V, h->W + c0 * C, C, 0.0f, h->dhn + r0 * C, C);
    if (h->dW && d0 < c1) os_k->gemm(1, 0, c1 - d0, C, n, 1.0f, lg + (d0 - c0), V, hr, C, 1.0f, h->dW + d0 * C, C);
}

void os_head_run_classes(head_run *h, const int64_t start[NCLS], const int64_t cnt[NCLS], int64_t Nc, int64_t Nall) {
    int64_t n = Nc < Nall ? Nc : Nall, rows = n > 0 ? k_xent_chunk_rows(h->m->V, n) : 1;
    for (int c = 0; c < NCLS; c++) {
        int64_t left = cnt[c], r0 = start[c];
        h->first = r0;
        for (int64_t k = (left + rows - 1) / rows; k > 0; k--) {
            n = share(left, k);
            left -= n;
            head_chunk(h, r0, n, h->c0[c], h->c1[c], share(left, k - 1));
            r0 += n;
        }
    }
}

void os_head_loss(const os_model *m, const os_head_weights *w, const os_head_grads *g, const os_head_task *t,
                  os_head_buf *buf, os_loss_sums *s) {
    int64_t Nall = t->B * t->L, N = Nall, C = m->C, V = m->V, G = m->oc.G, T = m->oc.text_vocab;
    memset(s, 0, sizeof *s);
    if (t->last) {
        last_logits(m, w->lm_head, t, buf);
        return;
    }
    int bw = g != NULL;   // the backward runs
    head_seg own = {.end = INT64_MAX, .s = s};
    head_run h = {.m = m, .t = t, .buf = buf, .s = s, .W = w->lm_head, .Wa = w->adapter_w, .ba = w->adapter_b,
                  .dW = bw ? g->lm_head : NULL, .dWa = bw ? g->adapter_w : NULL, .dba = bw ? g->adapter_b : NULL,
                  .hn = buf->hn, .dhn = buf->dhn, .row0 = bw && g->lm_head ? g->lm_head_row0 : 0,
                  .nterms = t->labels ? (int)G + 1 : 0, .bw = bw, .dh = bw && t->dh, .c0 = {0, 0, T},
                  .c1 = {V, T, V}, .seg = &own, .nseg = 1};
    own.scale = h.scale;
    for (int k = 0; k < h.nterms; k++) {
        h.y[k] = buf->y + k * N;
        s->count[k] = targets(m, t, k, h.y[k]);
        h.scale[k] = s->count[k] && bw ? t->dscale * m->oc.loss_w[k] / (float)s->count[k] : 0.0f;
    }
    // the classes' rows; every row in the first class when the logits are requested
    int64_t ncls[NCLS] = {N, 0, 0}, *idx = NULL;
    if (h.nterms && !t->logits) {
        idx = os_alloc(sizeof(int64_t) * (size_t)N, "head rows with a target");
        N = order_rows(&h, N, idx, ncls);
    }
    // bf16 training: the chunks' gradients rounded once into the stash, the weight gradients one product per stash
    h.e = bw && h.nterms && buf->dls ? os_k->gemm_rounds() : 0;
    h.srows = h.e ? os_head_stash_rows(m, Nall) : 0;   // sized for all rows (activations.c)
    os_k->gemm_pin(h.W, V, C, C);   // bf16 (--torch_dtype): W rounded once, not twice per logits chunk
    // every rank with the other ranks given joins the plan, also one whose rows cannot move (idx NULL: the logits
    // are wanted, --dump_logits on one rank only), which then stops every rank's moves
    if (!h.nterms || !t->peers || !os_head_balanced(&h, t->peers, ncls, idx, Nall)) {
        int64_t start[NCLS] = {0, ncls[0], ncls[0] + ncls[1]};
        os_head_run_classes(&h, start, ncls, N, Nall);
        if (idx && h.dh) expand_dh(&h, idx, N, Nall);
    }
    os_k->gemm_unpin();
    os_free(idx);
}

void os_head_norm_bwd(const os_model *m, const float *norm, float *dnorm, const float *x, int64_t N,
                      const os_head_buf *buf, float *dx) {
    os_k->zero(dx, N * m->C);
    os_k->rmsnorm_bwd(dx, dnorm, buf->dhn, x, norm, buf->rstd, N, m->C);
}
