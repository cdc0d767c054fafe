#include "model/head_compute.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "model/head_stash.h"

// one computation: the head, its rows, the gradients (none: all NULL) and the bf16 stash
typedef struct {
    const os_head *hd;
    const os_head_rows *r;
    const os_head_grads *g;
    int64_t row0;        // dW is computed for lm_head rows [row0, V)
    os_head_stash st;    // e = 0: no stash
} pass;

void os_head_class_cols(const os_model *m, int c, int64_t *c0, int64_t *c1) {
    *c0 = c == OS_HEAD_CLS_A ? m->oc.text_vocab : 0;
    *c1 = c == OS_HEAD_CLS_T ? m->oc.text_vocab : m->V;
}

void os_head_row_costs(const os_head *hd, double cost[OS_HEAD_NCLS]) {
    const os_model *m = hd->m;
    const os_head_grads *g = hd->g;
    double C = (double)m->C, A = (double)m->oc.audio_vocab, GA = (double)(m->oc.G * m->oc.audio_vocab);
    int64_t row0 = g && g->lm_head ? g->lm_head_row0 : 0;
    for (int c = 0; c < OS_HEAD_NCLS; c++) {
        int64_t c0, c1;
        os_head_class_cols(m, c, &c0, &c1);
        int64_t d0 = row0 > c0 ? row0 : c0;
        double w = (double)(c1 - c0);
        cost[c] = C * w * (1 + hd->dh) + (g && g->lm_head && d0 < c1 ? C * (double)(c1 - d0) : 0) + 8 * w;
        if (c != OS_HEAD_CLS_T && hd->w->adapter_w && m->oc.G > 0)
            cost[c] += GA * A * (1 + (g != NULL) + (g && g->adapter_w));
        if (cost[c] < 1) cost[c] = 1;
    }
}

// the cross-entropy of loss term k over rows [r0, r0 + n), lg their `ncols` logits (row stride ld): each run of
// rows of one owner with its scale into its sums
static void xent(const pass *p, int k, float *lg, int64_t ld, int64_t r0, int64_t n, int64_t ncols) {
    const os_head_rows *r = p->r;
    for (int64_t a = r0, b; a < r0 + n; a = b) {
        int o = r->owner ? r->owner[a] : 0;
        for (b = r->owner ? a + 1 : r0 + n; b < r0 + n && r->owner[b] == o; b++) {}
        os_loss_sums *s = &r->sums[o];
        os_k->xent_fwd_bwd(lg + (a - r0) * ld, ld, r->y + k * r->ldy + a, b - a, ncols,
                           r->scale[o * (OS_MAX_G + 1) + k], &s->sum[k], &s->correct[k]);
    }
}

// the audio losses of a chunk of n rows at row r0, la [n, *] (stride V) its audio columns: through the adapter
// (al[n, G*A] = la[:, :A] @ Wa^T + ba, layer i = al[:, i*A:(i+1)*A]) or, without it, layer g's own columns
// [g*A, (g+1)*A) (G = 1, or the layer shift: slam_model_s2s.py:262)
static void audio_fwd(pass *p, int64_t r0, int64_t n, float *la) {
    const os_model *m = p->hd->m;
    const os_head_weights *w = p->hd->w;
    os_head_buf *buf = p->hd->buf;
    int64_t V = m->V, G = m->oc.G, A = m->oc.audio_vocab, GA = G * A;
    float *al = buf->al;
    if (!w->adapter_w) {
        for (int k = 0; k < G; k++) xent(p, 1 + k, la + k * A, V, r0, n, A);
        return;
    }
    if (p->st.e) {   // the adapter's input rounded into the stash: the forward and dWa read it
        void *ar = os_head_stash_row(&p->st, buf->ain, A);
        os_k->gemm_round(ar, la, n, A, V);
        os_k->gemm_rounded(OS_PRE_A, 0, 1, n, GA, A, 1.0f, ar, A, w->adapter_w, A, 0.0f, al, GA);
    } else
        os_k->gemm(0, 1, n, GA, A, 1.0f, la, V, w->adapter_w, A, 0.0f, al, GA);
    for (int64_t i = 0; i < n; i++) os_k->add(al + i * GA, al + i * GA, w->adapter_b, GA);
    for (int k = 0; k < G; k++) xent(p, 1 + k, al + k * A, GA, r0, n, A);
}

// backward through the adapter into la's first A columns: dA = dal @ Wa, dWa += dal^T @ a, dba += colsum(dal)
static void adapter_bwd(pass *p, int64_t n, float *la) {
    const os_model *m = p->hd->m;
    const float *Wa = p->hd->w->adapter_w;
    os_head_buf *buf = p->hd->buf;
    int64_t V = m->V, A = m->oc.audio_vocab, GA = m->oc.G * A;
    float *al = buf->al, *dA = buf->dA, *dWa = p->g->adapter_w, *dba = p->g->adapter_b;
    for (int64_t i = 0; dba && i < n; i++) os_k->add(dba, dba, al + i * GA, GA);
    if (p->st.e) {   // dal rounded once: dA now, dWa with the stash
        void *dr = os_head_stash_row(&p->st, buf->als, GA);
        os_k->gemm_round(dr, al, n, GA, GA);
        os_k->gemm_rounded(OS_PRE_A, 0, 0, n, A, GA, 1.0f, dr, GA, Wa, A, 0.0f, dA, A);
    } else {
        if (dWa) os_k->gemm(1, 0, GA, A, n, 1.0f, al, GA, la, V, 1.0f, dWa, A);
        os_k->gemm(0, 0, n, A, GA, 1.0f, al, GA, Wa, A, 0.0f, dA, A);
    }
    for (int64_t i = 0; i < n; i++) os_k->copy(la + i * V, dA + i * A, A);
}

// One chunk: rows [r0, r0 + n), all of one class, lm_head columns [c0, c1) (c0 = 0: the text columns are among
// them; c1 > T: the audio ones). The logits buffer holds them at stride V, column c0 first. next: the rows of the
// class's next chunk (0: this is its last).
static void chunk(pass *p, int64_t r0, int64_t n, int64_t c0, int64_t c1, int64_t next) {
    const os_head *hd = p->hd;
    const os_model *m = hd->m;
    const os_head_rows *r = p->r;
    const float *W = hd->w->lm_head;
    float *dW = p->g->lm_head;
    int64_t C = m->C, V = m->V, T = m->oc.text_vocab, w = c1 - c0;
    int text = c0 == 0, audio = c1 > T && m->oc.G > 0;
    const float *hr = r->hn + r0 * C;
    float *lg = hd->buf->logits, *la = lg + (T - c0);   // la: the audio columns (c0 <= T)
    os_k->gemm(0, 1, n, w, C, 1.0f, hr, C, W + c0 * C, C, 0.0f, lg, V);   // logits[n, c0:c1]
    if (hd->logits) os_k->download(hd->logits + r0 * V, lg, (int64_t)sizeof(float) * n * V);   // every row and column (w = V)
    if (!r->nterms) return;
    if (text) xent(p, 0, lg, V, r0, n, T);
    if (audio) audio_fwd(p, r0, n, la);
    if (!hd->g) return;   // forward only: the losses are all (the xent kernels wrote zero gradients in place)
    if (audio && hd->w->adapter_w) adapter_bwd(p, n, la);
    // lm_head backward: dh = dlogits @ W[c0:c1], dW[d0:c1] += dlogits[:, d0:]^T h
    if (p->st.e) {   // dlogits rounded once: dh and dW with the stash
        if (hd->dh || dW) os_k->gemm_round(os_head_stash_row(&p->st, hd->buf->dls, w), lg, n, w, V);
        p->st.n += n;
        if (!next || p->st.n + next > p->st.cap) os_head_stash_flush(&p->st, hd, r, c0, c1);
        return;
    }
    int64_t d0 = p->row0 > c0 ? p->row0 : c0;
    if (hd->dh) os_k->gemm(0, 0, n, C, w, 1.0f, lg, V, W + c0 * C, C, 0.0f, r->dhn + r0 * C, C);
    if (dW && d0 < c1) os_k->gemm(1, 0, c1 - d0, C, n, 1.0f, lg + (d0 - c0), V, hr, C, 1.0f, dW + d0 * C, C);
}

// the rows of the next of k equal chunks over `left` rows (0 when k = 0)
static int64_t share(int64_t left, int64_t k) { return k > 0 ? (left + k - 1) / k : 0; }

void os_head_compute(const os_head *hd, const os_head_rows *r) {
    static const os_head_grads none = {0};
    const os_model *m = hd->m;
    pass p = {.hd = hd, .r = r, .g = hd->g ? hd->g : &none};
    p.row0 = p.g->lm_head ? p.g->lm_head_row0 : 0;
    // bf16 training: the chunks' gradients rounded once into the stash, the weight gradients one product per stash
    p.st.e = hd->g && r->nterms && hd->buf->dls ? os_k->gemm_rounds() : 0;
    p.st.cap = p.st.e ? os_head_stash_rows(m, hd->N) : 0;   // sized for the micro-batch's rows (activations.c)
    int64_t n = 0, r0 = 0;
    for (int c = 0; c < OS_HEAD_NCLS; c++) n += r->cnt[c];
    if (n > hd->N) n = hd->N;
    int64_t rows = n > 0 ? k_xent_chunk_rows(m->V, n, m->logits_rows) : 1;
    for (int c = 0; c < OS_HEAD_NCLS; c++) {
        int64_t left = r->cnt[c], c0, c1;
        os_head_class_cols(m, c, &c0, &c1);
        p.st.first = r0;
        for (int64_t k = (left + rows - 1) / rows; k > 0; k--) {
            int64_t k_rows = share(left, k);
            left -= k_rows;
            chunk(&p, r0, k_rows, c0, c1, share(left, k - 1));
            r0 += k_rows;
        }
    }
}
