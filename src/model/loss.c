#include "model/loss.h"
#include "core/alloc.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include <string.h>

// ---- the micro-batch: buckets, targets, row order ----

void os_loss_open(os_loss *L, const os_weights *w, const os_grads *g, int64_t N, int dh, float *dump) {
    const os_model *m = L->m;
    int ad = m->b_adapter >= 0;
    w->gather(w->ctx, m->b_head);
    if (g) g->open(g->ctx, m->b_head);
    if (ad) {
        w->gather(w->ctx, m->b_adapter);
        if (g) g->open(g->ctx, m->b_adapter);
    }
    L->lm_head = os_weight_t(w, m->lm_head);
    L->adapter_w = ad ? os_weight_t(w, m->adapter_w) : os_tensor_none();
    L->adapter_b = ad ? os_weight(w, m->adapter_b) : NULL;
    L->dlm_head = g ? os_grad(g, m->lm_head) : NULL;
    L->dadapter_w = g && ad ? os_grad(g, m->adapter_w) : NULL, L->dadapter_b = g && ad ? os_grad(g, m->adapter_b) : NULL;
    // lm_head trained on rows [row0, V) only (--trainable_embed_rows, docs/training.md "Freezing"); it is its
    // bucket's only parameter (model/omni.c), so the bucket's trained range counts its elements
    L->row0 = L->dlm_head ? m->reg.b[m->b_head].train_lo / m->C : 0;
    L->N = N, L->train = g != NULL, L->dh = g && dh, L->dump = dump;
    L->order = NULL, L->n = N;
}

// shifted targets of loss term k (0 = text, 1+i = audio layer i) for every row into y[N] (host); returns their count
static int64_t targets(const os_model *m, const int32_t *labels, int64_t B, int64_t R, int64_t Lp, int k, int32_t *y) {
    int64_t G = m->oc.G, count = 0;
    int64_t row = k == 0 ? (G > 0 ? G : 0) : k - 1;
    for (int64_t bi = 0; bi < B; bi++)
        for (int64_t p = 0; p < Lp; p++) {
            int32_t v = p + 1 < Lp ? labels[(bi * R + row) * Lp + p + 1] : -100;
            y[bi * Lp + p] = v;
            count += v != -100;
        }
    return count;
}

// the class of row r of y [K, N] by its targets (OS_LOSS_NCLS: none)
static int row_class(const int32_t *y, int K, int64_t N, int64_t r) {
    int text = y[r] != -100, audio = 0;
    for (int k = 1; k < K && !audio; k++) audio = y[k * N + r] != -100;
    return text ? (audio ? OS_LOSS_TA : OS_LOSS_T) : audio ? OS_LOSS_A : OS_LOSS_NCLS;
}

// Rows with a target moved to the front of hn [N, C] and of the targets y [K, N] (host), grouped by class (in order
// within one), by one gather; cnt[c] the rows of class c; returns their count n. *order: the lists on the backend,
// [n] the original row of row i, then [N] the place of row r among them or -1 (without a target): the inverse,
// which gathers them back (os_loss_close). tmp (at least [N, C], the backend's) is the scratch.
static int64_t order_rows(const os_model *m, float *hn, int32_t *y, int K, int64_t N, float *tmp, int32_t **order,
                          int64_t cnt[OS_LOSS_NCLS]) {
    int64_t C = m->C, n = 0;
    int32_t *idx = os_alloc(sizeof(int32_t) * (size_t)(2 * N + 1), "loss rows with a target");
    for (int c = 0; c < OS_LOSS_NCLS; c++) {
        cnt[c] = 0;
        for (int64_t r = 0; r < N; r++)
            if (row_class(y, K, N, r) == c) idx[n++] = (int32_t)r, cnt[c]++;
    }
    int32_t *inv = idx + n;
    for (int64_t r = 0; r < N; r++) inv[r] = -1;
    for (int64_t i = 0; i < n; i++) inv[idx[i]] = (int32_t)i;
    *order = os_ids_upload(idx, n + N, "loss row order (backend)");
    os_k->gather_rows(tmp, hn, *order, n, C);
    os_k->copy(hn, tmp, n * C);
    int32_t *yt = os_alloc(sizeof(int32_t) * (size_t)(n ? n : 1), "loss targets in row order");
    for (int k = 0; k < K; k++) {
        for (int64_t i = 0; i < n; i++) yt[i] = y[k * N + idx[i]];
        memcpy(y + k * N, yt, sizeof(int32_t) * (size_t)n);
    }
    os_free(yt), os_free(idx);
    return n;
}

void os_loss_targets(os_loss *L, const int32_t *labels, int64_t B, int64_t R, int64_t Lp, float dscale, float *hn,
                     float *dhn, os_loss_rows *r) {
    static const os_loss_sums zero;
    const os_model *m = L->m;
    int64_t N = B * Lp;
    int K = (int)m->oc.G + 1;
    os_k->upload(L->sums, &zero, (int64_t)sizeof zero);
    memset(L->scale, 0, sizeof L->scale), memset(L->count, 0, sizeof L->count);
    // every row in the first class when the logits are wanted (fixed), else the rows with a target by class
    *r = (os_loss_rows){.cnt = {N, 0, 0}, .nterms = K, .hn = hn, .y = L->y, .yh = L->yh, .ldy = N, .scale = L->scale,
                        .sums = L->sums, .dhn = dhn, .fixed = L->dump != NULL};
    for (int k = 0; k < K; k++) {
        L->count[k] = targets(m, labels, B, R, Lp, k, L->yh + k * N);
        L->scale[k] = L->count[k] && L->train ? dscale * m->oc.loss_w[k] / (float)L->count[k] : 0.0f;
    }
    if (!r->fixed) L->n = order_rows(m, hn, L->yh, K, N, L->logits, &L->order, r->cnt);
    os_k->upload(L->y, L->yh, (int64_t)sizeof(int32_t) * K * N);
}

void os_loss_close(os_loss *L, const os_weights *w, const os_grads *g, float *dhn) {
    const os_model *m = L->m;
    int64_t C = m->C;
    if (L->order && L->dh) {   // the ordered rows [0, n) back at their places by the inverse, the skipped rows zero
        os_k->copy(L->logits, dhn, L->n * C);
        os_k->zero(dhn, L->N * C);
        os_k->gather_rows(dhn, L->logits, L->order + L->n, L->N, C);
    }
    os_k->free(L->order), L->order = NULL;
    int ad = m->b_adapter >= 0;
    if (ad) w->release(w->ctx, m->b_adapter);
    w->release(w->ctx, m->b_head);
    if (ad && g) g->close(g->ctx, m->b_adapter);
    if (g && m->b_head != m->b_embed) g->close(g->ctx, m->b_head);   // tied: the embedding backward closes it
}

void os_loss_read(const os_loss *L, os_loss_sums *s) {
    os_k->download(s, L->sums, (int64_t)sizeof *s);
    memcpy(s->count, L->count, sizeof s->count);
}

// ---- the rows: chunks of logits, the cross-entropies, the adapter, their backward ----

// lm_head columns [c0, c1) of class c: text and audio every column, text [0, T), audio [T, V)
static void class_cols(const os_model *m, int c, int64_t *c0, int64_t *c1) {
    *c0 = c == OS_LOSS_A ? m->oc.text_vocab : 0;
    *c1 = c == OS_LOSS_T ? m->oc.text_vocab : m->V;
}

void os_loss_row_costs(const os_loss *L, double cost[OS_LOSS_NCLS]) {
    const os_model *m = L->m;
    double C = (double)m->C, A = (double)m->oc.audio_vocab, GA = (double)(m->oc.G * m->oc.audio_vocab);
    for (int c = 0; c < OS_LOSS_NCLS; c++) {
        int64_t c0, c1;
        class_cols(m, c, &c0, &c1);
        int64_t d0 = L->row0 > c0 ? L->row0 : c0;
        double w = (double)(c1 - c0);
        cost[c] = C * w * (1 + L->dh) + (L->dlm_head && d0 < c1 ? C * (double)(c1 - d0) : 0) + 8 * w;
        if (c != OS_LOSS_T && L->adapter_w.data && m->oc.G > 0)
            cost[c] += GA * A * (1 + L->train + (L->dadapter_w != NULL));
        if (cost[c] < 1) cost[c] = 1;
    }
}

// where the next chunk's rows start in stash buffer b of w elements per row
static void *stash_row(const os_loss *L, void *b, int64_t w) { return (char *)b + L->st_n * w * L->st_e; }

// c = a @ b (beta 0) or c += a @ b (beta 1): the loss's products, no bias
static void mm(os_tensor c, os_tensor a, os_tensor b, float beta) {
    os_k->matmul(c, a, b, 1.0f, beta, os_tensor_none(), os_tensor_none());
}

// the stash's products over its rows of rows r (columns [c0, c1)): dhn = dlogits @ W[c0:c1] (W packed once for all
// of them), dW[max(row0, c0):c1] += dlogits^T hn, dWa += dal^T a; then it is empty, the next row after them
static void stash_flush(os_loss *L, const os_loss_rows *r, int64_t c0, int64_t c1) {
    const os_model *m = L->m;
    int64_t C = m->C, A = m->oc.audio_vocab, GA = m->oc.G * A, w = c1 - c0, n = L->st_n;
    int64_t d0 = L->row0 > c0 ? L->row0 : c0;
    if (!n) return;
    os_tensor dls = os_mat(L->dls, OS_BF16, n, w, w);   // [n, w]
    if (L->dh) mm(os_matf(r->dhn + L->st_first * C, n, C, C), dls, os_tensor_rows(L->lm_head, c0, w), 0.0f);
    if (L->dlm_head && d0 < c1)
        mm(os_matf(L->dlm_head + d0 * C, c1 - d0, C, C), os_tensor_t(os_tensor_cols(dls, d0 - c0, c1 - d0)),
           os_tensor_rows(L->hv, L->st_first, n), 1.0f);
    if (L->dadapter_w && c1 > m->oc.text_vocab)
        mm(os_matf(L->dadapter_w, GA, A, A), os_tensor_t(os_mat(L->als, OS_BF16, n, GA, GA)),
           os_mat(L->ain, OS_BF16, n, A, A), 1.0f);
    L->st_first += L->st_n, L->st_n = 0;
}

// the cross-entropy of loss term k over rows [r0, r0 + n), lg their `ncols` logits (row stride ld): each run of
// rows of one owner with its scale into its sums
static void xent(const os_loss_rows *r, int k, float *lg, int64_t ld, int64_t r0, int64_t n, int64_t ncols) {
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
static void audio_fwd(os_loss *L, const os_loss_rows *r, int64_t r0, int64_t n, float *la) {
    const os_model *m = L->m;
    int64_t V = m->V, G = m->oc.G, A = m->oc.audio_vocab, GA = G * A;
    float *al = L->al;
    if (!L->adapter_w.data) {
        for (int k = 0; k < G; k++) xent(r, 1 + k, la + k * A, V, r0, n, A);
        return;
    }
    os_tensor in = os_matf(la, n, A, V);
    if (L->st_e) {   // the adapter's input rounded into the stash (bf16): the forward and dWa read it
        os_tensor ar = os_mat(stash_row(L, L->ain, A), OS_BF16, n, A, A);
        os_k->cast(ar, in);
        in = ar;
    }
    mm(os_matf(al, n, GA, GA), in, os_tensor_t(L->adapter_w), 0.0f);
    os_k->add_row_bias(al, L->adapter_b, n, GA);
    for (int k = 0; k < G; k++) xent(r, 1 + k, al + k * A, GA, r0, n, A);
}

// backward through the adapter into la's first A columns (stride V, over the adapter's input once dWa has read it):
// dA = dal @ Wa, dWa += dal^T @ a, dba += colsum(dal)
static void adapter_bwd(os_loss *L, int64_t n, float *la) {
    const os_model *m = L->m;
    int64_t V = m->V, A = m->oc.audio_vocab, GA = m->oc.G * A;
    float *al = L->al, *dWa = L->dadapter_w, *dba = L->dadapter_b;
    if (dba) os_k->sum_rows(dba, al, n, GA);
    os_tensor dal = os_matf(al, n, GA, GA), dA = os_matf(la, n, A, V);
    if (L->st_e) {   // dal rounded once (bf16): dA now, dWa with the stash (which holds the input)
        os_tensor dr = os_mat(stash_row(L, L->als, GA), OS_BF16, n, GA, GA);
        os_k->cast(dr, dal);
        dal = dr;
    } else if (dWa)
        mm(os_matf(dWa, GA, A, A), os_tensor_t(dal), dA, 1.0f);
    mm(dA, dal, L->adapter_w, 0.0f);
}

// One chunk: rows [r0, r0 + n), all of one class, lm_head columns [c0, c1) (c0 = 0: the text columns are among
// them; c1 > T: the audio ones). The logits buffer holds them at stride V, column c0 first. next: the rows of the
// class's next chunk (0: this is its last).
static void chunk(os_loss *L, const os_loss_rows *r, int64_t r0, int64_t n, int64_t c0, int64_t c1, int64_t next) {
    const os_model *m = L->m;
    os_tensor W = L->lm_head;
    float *dW = L->dlm_head;
    int64_t C = m->C, V = m->V, T = m->oc.text_vocab, w = c1 - c0;
    int text = c0 == 0, audio = c1 > T && m->oc.G > 0;
    os_tensor hr = os_tensor_rows(L->hv, r0, n);
    float *lg = L->logits, *la = lg + (T - c0);   // la: the audio columns (c0 <= T)
    os_tensor Wc = os_tensor_rows(W, c0, w), lgc = os_matf(lg, n, w, V);   // W[c0:c1], logits[n, c0:c1]
    mm(lgc, hr, os_tensor_t(Wc), 0.0f);
    if (L->dump) os_k->download(L->dump + r0 * V, lg, (int64_t)sizeof(float) * n * V);   // every row and column (w = V)
    if (!r->nterms) return;
    if (text) xent(r, 0, lg, V, r0, n, T);
    if (audio) audio_fwd(L, r, r0, n, la);
    if (!L->train) return;   // forward only: the losses are all (the xent kernels wrote zero gradients in place)
    if (audio && L->adapter_w.data) adapter_bwd(L, n, la);
    // lm_head backward: dh = dlogits @ W[c0:c1], dW[d0:c1] += dlogits[:, d0:]^T h
    if (L->st_e) {   // dlogits rounded once (bf16): dh and dW with the stash
        if (L->dh || dW) os_k->cast(os_mat(stash_row(L, L->dls, w), OS_BF16, n, w, w), lgc);
        L->st_n += n;
        if (!next || L->st_n + next > L->st_cap) stash_flush(L, r, c0, c1);
        return;
    }
    int64_t d0 = L->row0 > c0 ? L->row0 : c0;
    if (L->dh) mm(os_matf(r->dhn + r0 * C, n, C, C), lgc, Wc, 0.0f);
    if (dW && d0 < c1)
        mm(os_matf(dW + d0 * C, c1 - d0, C, C), os_tensor_t(os_tensor_cols(lgc, d0 - c0, c1 - d0)), hr, 1.0f);
}

// the rows of the next of k equal chunks over `left` rows (0 when k = 0)
static int64_t share(int64_t left, int64_t k) { return k > 0 ? (left + k - 1) / k : 0; }

void os_loss_compute(os_loss *L, const os_loss_rows *r) {
    const os_model *m = L->m;
    // bf16 training: the chunks' gradients rounded once into the stash (bf16, 2 bytes an element; laid out with the
    // activations only then, st_cap rows for the micro-batch's), the weight gradients one product per stash
    L->st_e = L->train && r->nterms && L->dls ? 2 : 0;
    L->st_n = 0;
    int64_t n = 0, r0 = 0, C = m->C;
    for (int c = 0; c < OS_LOSS_NCLS; c++) n += r->cnt[c];
    if (n > L->N) n = L->N;
    // the rows' hn: read by the logits and the lm_head weight-gradient products; with both (bf16, lm_head trained)
    // rounded once into hnh (bf16) and read there
    L->hv = os_matf(r->hn, n, C, C);
    if (L->st_e && L->hnh && L->dlm_head && n > 0) {
        os_tensor h = os_mat(L->hnh, OS_BF16, n, C, C);
        os_k->cast(h, L->hv);
        L->hv = h;
    }
    int64_t rows = n > 0 ? k_xent_chunk_rows(m->V, n, m->logits_rows) : 1;
    for (int c = 0; c < OS_LOSS_NCLS; c++) {
        int64_t left = r->cnt[c], c0, c1;
        class_cols(m, c, &c0, &c1);
        L->st_first = r0;
        for (int64_t k = (left + rows - 1) / rows; k > 0; k--) {
            int64_t k_rows = share(left, k);
            left -= k_rows;
            chunk(L, r, r0, k_rows, c0, c1, share(left, k - 1));
            r0 += k_rows;
        }
    }
}

// ---- logits only ----

void os_loss_logits(os_loss *L, const os_weights *w, const float *hn, int64_t B, int64_t Lp, int last, float *out) {
    const os_model *m = L->m;
    w->gather(w->ctx, m->b_head);
    os_tensor W = os_weight_t(w, m->lm_head);
    if (last) {
        // each sample's last row: when each sample is one position (batched decoding, infer/infer_batch.c) the rows
        // are contiguous and one product covers as many of them as the buffer holds, else one product per sample
        int64_t step = Lp == 1 ? k_xent_chunk_rows(m->V, B, m->logits_rows) : 1;
        for (int64_t b = 0; b < B; b += step) {
            int64_t n = B - b < step ? B - b : step;
            mm(os_matf(L->logits, n, m->V, m->V), os_matf(hn + (b * Lp + Lp - 1) * m->C, n, m->C, m->C),
               os_tensor_t(W), 0.0f);
            os_k->download(out + b * m->V, L->logits, (int64_t)sizeof(float) * n * m->V);
        }
    } else {   // every row: the loss's chunks without targets, each downloaded
        L->lm_head = W, L->adapter_w = os_tensor_none(), L->adapter_b = NULL;
        L->dlm_head = L->dadapter_w = L->dadapter_b = NULL;
        L->row0 = 0, L->N = B * Lp, L->train = L->dh = 0, L->dump = out;
        os_loss_compute(L, &(os_loss_rows){.cnt = {B * Lp, 0, 0}, .hn = hn, .fixed = 1});
    }
    w->release(w->ctx, m->b_head);
}
