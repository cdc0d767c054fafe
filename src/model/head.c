#include "model/head.h"
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

// bf16 training: the stash (head.h) holds the rounded gradients of rows [first, first + n); the products of
// those rows, one each: dhn[rows] = dlogits @ W (W packed once for all of them, not once per chunk), dW[row0:] +=
// dlogits[:, row0:]^T hn, dWa += dal^T a
typedef struct {
    int64_t first, n, e;   // e: bytes per rounded element
} stash;

static void stash_flush(const os_model *m, const os_head_buf *buf, stash *st, const float *W, int dh, float *dW,
                        int64_t row0, float *dWa) {
    int64_t C = m->C, V = m->V, A = m->oc.audio_vocab, GA = m->oc.G * A;
    if (!st->n) return;
    if (dh) os_k->gemm_rounded(OS_PRE_A, 0, 0, st->n, C, V, 1.0f, buf->dls, V, W, C, 0.0f, buf->dhn + st->first * C, C);
    if (dW)
        os_k->gemm_rounded(OS_PRE_A, 1, 0, V - row0, C, st->n, 1.0f, (const char *)buf->dls + row0 * st->e, V,
                           buf->hn + st->first * C, C, 1.0f, dW + row0 * C, C);
    if (dWa) os_k->gemm_rounded(OS_PRE_A | OS_PRE_B, 1, 0, GA, A, st->n, 1.0f, buf->als, GA, buf->ain, A, 1.0f, dWa, A);
    st->first += st->n, st->n = 0;
}

// the stash row where this chunk starts, in buffer b of w elements per row
static void *stash_row(const stash *st, void *b, int64_t w) { return (char *)b + st->n * w * st->e; }

// The rows with a target in some loss term moved to the front of hn and of the targets y (in order, idx[i] the
// original row of row i); returns their count. A row with none adds nothing to any loss or gradient, so the head
// skips its logits: in SLAM-Omni the speech input and prompt positions.
static int64_t compact_rows(const os_model *m, os_head_buf *buf, int32_t **y, int nterms, int64_t N, int64_t *idx) {
    int64_t C = m->C, n = 0;
    for (int64_t r = 0; r < N; r++) {
        int any = 0;
        for (int k = 0; k < nterms && !any; k++) any = y[k][r] != -100;
        if (!any) continue;
        if (n != r) {   // n < r: the rows do not overlap
            os_k->copy(buf->hn + n * C, buf->hn + r * C, C);
            for (int k = 0; k < nterms; k++) y[k][n] = y[k][r];
        }
        idx[n++] = r;
    }
    return n;
}

// dhn's compact rows [0, n) back to their rows idx[i] (last first: idx[i] >= i), the skipped rows zero
static void expand_dh(const os_model *m, float *dhn, const int64_t *idx, int64_t n, int64_t N) {
    int64_t C = m->C;
    for (int64_t i = n - 1; i >= 0; i--)
        if (idx[i] != i) os_k->copy(dhn + idx[i] * C, dhn + i * C, C);
    for (int64_t r = 0, i = 0; r < N; r++) {
        if (i < n && idx[i] == r) i++;
        else os_k->zero(dhn + r * C, C);
    }
}

void os_head_loss(const os_model *m, const os_head_weights *w, const os_head_grads *g, const os_head_task *t,
                  os_head_buf *buf, os_loss_sums *s) {
    int64_t Nall = t->B * t->L, N = Nall, C = m->C, V = m->V, G = m->oc.G, T = m->oc.text_vocab, A = m->oc.audio_vocab;
    memset(s, 0, sizeof *s);
    if (t->last) {
        last_logits(m, w->lm_head, t, buf);
        return;
    }
    int nterms = t->labels ? (int)G + 1 : 0, bw = g != NULL;   // bw: the backward runs
    int dh = bw && t->dh;
    int64_t Va = G > 0 ? (m->oc.layershift ? G : 1) * A : 0;   // logit columns after T that a loss reads
    int32_t *y[OS_MAX_G + 1];
    float scale[OS_MAX_G + 1];
    for (int k = 0; k < nterms; k++) {
        y[k] = buf->y + k * N;
        s->count[k] = targets(m, t, k, y[k]);
        scale[k] = s->count[k] && bw ? t->dscale * m->oc.loss_w[k] / (float)s->count[k] : 0.0f;
    }
    int64_t *idx = NULL;   // rows compacted (no logits requested): idx[i] = the original row of row i
    if (nterms && !t->logits) {
        idx = os_alloc(sizeof(int64_t) * (size_t)N, "head rows with a target");
        N = compact_rows(m, buf, y, nterms, N, idx);
    }
    const float *W = w->lm_head, *Wa = w->adapter_w, *ba = w->adapter_b;
    int ad = Wa != NULL;
    float *dW = bw ? g->lm_head : NULL, *dWa = bw ? g->adapter_w : NULL, *dba = bw ? g->adapter_b : NULL;
    int64_t row0 = dW ? g->lm_head_row0 : 0;
    int64_t rows = k_xent_chunk_rows(V, N), GA = G * A;
    // bf16 training: the chunks' gradients rounded once into the stash, the weight gradients one product per stash
    stash st = {0, 0, bw && nterms && buf->dls ? os_k->gemm_rounds() : 0};
    int64_t srows = st.e ? os_head_stash_rows(m, Nall) : 0;   // sized for all rows (activations.c), used for N
    float *logits = buf->logits, *al = buf->al, *dA = buf->dA;
    os_k->gemm_pin(W, V, C, C);   // bf16 (--torch_dtype): W rounded once, not twice per logits chunk
    for (int64_t r0 = 0; r0 < N; r0 += rows) {
        int64_t n = N - r0 < rows ? N - r0 : rows;
        const float *h = buf->hn + r0 * C;
        os_k->linear_fwd(logits, h, W, NULL, n, C, V);                        // logits[n, V]
        if (t->logits) os_k->copy(t->logits + r0 * V, logits, n * V);
        if (!nterms) continue;
        // text: columns [0, T)
        s->sum[0] += os_k->xent_fwd_bwd(logits, V, y[0] + r0, n, T, scale[0], &s->correct[0]);
        if (!ad) {   // G = 1, or layer shift: layer g = columns [T + g*A, T + (g+1)*A) (slam_model_s2s.py:262)
            for (int64_t k = 0; k < G; k++)
                s->sum[1 + k] += os_k->xent_fwd_bwd(logits + T + k * A, V, y[1 + k] + r0, n, A, scale[1 + k], &s->correct[1 + k]);
        } else {
            // adapter: al[n, G*A] = logits[:, T:T+A] @ Wa^T + ba, layer i = al[:, i*A:(i+1)*A]
            if (st.e) {   // its input rounded into the stash: the forward and dWa read it
                void *ar = stash_row(&st, buf->ain, A);
                os_k->gemm_round(ar, logits + T, n, A, V);
                os_k->gemm_rounded(OS_PRE_A, 0, 1, n, GA, A, 1.0f, ar, A, Wa, A, 0.0f, al, GA);
            } else
                os_k->gemm(0, 1, n, GA, A, 1.0f, logits + T, V, Wa, A, 0.0f, al, GA);
            for (int64_t i = 0; i < n; i++) os_k->add(al + i * GA, al + i * GA, ba, GA);
            for (int64_t k = 0; k < G; k++)
                s->sum[1 + k] += os_k->xent_fwd_bwd(al + k * A, GA, y[1 + k] + r0, n, A, scale[1 + k], &s->correct[1 + k]);
        }
        if (!bw) continue;   // forward only: the losses are all (the xent kernels wrote zero gradients in place)
        if (ad) {
            // backward through the adapter: dA = dal @ Wa, dWa += dal^T @ a, dba += colsum(dal)
            for (int64_t i = 0; dba && i < n; i++) os_k->add(dba, dba, al + i * GA, GA);
            if (st.e) {   // dal rounded once: dA now, dWa with the stash
                void *dr = stash_row(&st, buf->als, GA);
                os_k->gemm_round(dr, al, n, GA, GA);
                os_k->gemm_rounded(OS_PRE_A, 0, 0, n, A, GA, 1.0f, dr, GA, Wa, A, 0.0f, dA, A);
            } else {
                if (dWa) os_k->gemm(1, 0, GA, A, n, 1.0f, al, GA, logits + T, V, 1.0f, dWa, A);
                os_k->gemm(0, 0, n, A, GA, 1.0f, al, GA, Wa, A, 0.0f, dA, A);
            }
            for (int64_t i = 0; i < n; i++) os_k->copy(logits + i * V + T, dA + i * A, A);
        }
        for (int64_t i = 0; i < n && T + Va < V; i++)    // columns no loss reads
            os_k->zero(logits + i * V + T + Va, V - T - Va);
        // lm_head backward: dh = dlogits @ W, dW += dlogits^T @ h
        if (st.e) {   // dlogits rounded once: dh and dW with the stash
            if (dh || dW) os_k->gemm_round(stash_row(&st, buf->dls, V), logits, n, V, V);
            st.n += n;
            int64_t next = N - r0 - n < rows ? N - r0 - n : rows;   // the next chunk's rows (0: this was the last)
            if (!next || st.n + next > srows) stash_flush(m, buf, &st, W, dh, dW, row0, dWa);
            continue;
        }
        if (dh) os_k->zero(buf->dhn + r0 * C, n * C);
        os_k->linear_bwd(dh ? buf->dhn + r0 * C : NULL, NULL, NULL, logits, h, W, n, C, V);
        if (dW) os_k->gemm(1, 0, V - row0, C, n, 1.0f, logits + row0, V, h, C, 1.0f, dW + row0 * C, C);   // dW[row0:] += dlogits^T h
    }
    os_k->gemm_unpin();
    if (idx && dh) expand_dh(m, buf->dhn, idx, N, Nall);
    os_free(idx);
}

void os_head_norm_bwd(const os_model *m, const float *norm, float *dnorm, const float *x, int64_t N,
                      const os_head_buf *buf, float *dx) {
    os_k->zero(dx, N * m->C);
    os_k->rmsnorm_bwd(dx, dnorm, buf->dhn, x, norm, buf->rstd, N, m->C);
}
