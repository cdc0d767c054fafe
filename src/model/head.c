#include "model/head.h"
#include "core/alloc.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "model/head_compute.h"
#include <string.h>

void os_head_norm_fwd(const os_model *m, const float *norm, const float *x, int64_t N, os_head_buf *buf) {
    os_k->rmsnorm_fwd(buf->hn, buf->rstd, x, norm, N, m->C, (float)m->cfg.rms_norm_eps);
}

void os_head_norm_bwd(const os_model *m, const float *norm, float *dnorm, const float *x, int64_t N,
                      const os_head_buf *buf, float *dx) {
    os_k->zero(dx, N * m->C);
    os_k->rmsnorm_bwd(dx, dnorm, buf->dhn, x, norm, buf->rstd, N, m->C);
}

// each sample's last row of lm_head logits into out[B, V] (inference; host memory: downloaded from the logits
// buffer): when each sample is one position (batched decoding, infer/infer_batch.c) the rows are contiguous and
// one product covers as many of them as the buffer holds (k_xent_chunk_rows), else one product per sample
static void last_logits(const os_model *m, const float *W, const os_head_task *t, const os_head_buf *buf) {
    int64_t step = t->L == 1 ? k_xent_chunk_rows(m->V, t->B, m->logits_rows) : 1;
    for (int64_t b = 0; b < t->B; b += step) {
        int64_t n = t->B - b < step ? t->B - b : step;
        os_k->linear_fwd(buf->logits, buf->hn + (b * t->L + t->L - 1) * m->C, W, NULL, n, m->C, m->V);
        os_k->download(t->logits + b * m->V, buf->logits, (int64_t)sizeof(float) * n * m->V);
    }
}

// shifted targets of loss term k (0 = text, 1+i = audio layer i) for every row into y[N] (host); returns their count
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

// the class of row r of y [K, N] by its targets (OS_HEAD_NCLS: none)
static int row_class(const int32_t *y, int K, int64_t N, int64_t r) {
    int text = y[r] != -100, audio = 0;
    for (int k = 1; k < K && !audio; k++) audio = y[k * N + r] != -100;
    return text ? (audio ? OS_HEAD_CLS_TA : OS_HEAD_CLS_T) : audio ? OS_HEAD_CLS_A : OS_HEAD_NCLS;
}

// Rows with a target moved to the front of hn [N, C] and of the targets y [K, N] (host), grouped by class (in order
// within one), idx[i] the original row of row i; cnt[c] the rows of class c; returns their count. A row with no
// target adds nothing to any loss or gradient and is skipped (in SLAM-Omni: the speech input and the prompt). tmp
// (at least [N, C], the backend's) is the scratch.
static int64_t order_rows(const os_model *m, float *hn, int32_t *y, int K, int64_t N, float *tmp, int64_t *idx,
                          int64_t cnt[OS_HEAD_NCLS]) {
    int64_t C = m->C, n = 0;
    for (int c = 0; c < OS_HEAD_NCLS; c++) {
        cnt[c] = 0;
        for (int64_t r = 0; r < N; r++)
            if (row_class(y, K, N, r) == c) idx[n++] = r, cnt[c]++;
    }
    for (int64_t i = 0; i < n; i++) os_k->copy(tmp + i * C, hn + idx[i] * C, C);
    os_k->copy(hn, tmp, n * C);
    int32_t *yt = os_alloc(sizeof(int32_t) * (size_t)(n ? n : 1), "head targets in row order");
    for (int k = 0; k < K; k++) {
        for (int64_t i = 0; i < n; i++) yt[i] = y[k * N + idx[i]];
        memcpy(y + k * N, yt, sizeof(int32_t) * (size_t)n);
    }
    os_free(yt);
    return n;
}

// dhn's ordered rows [0, n) back to their rows idx[i], the skipped rows zero (tmp [n, C] the scratch)
static void expand_dh(const os_model *m, float *dhn, const int64_t *idx, int64_t n, int64_t N, float *tmp) {
    int64_t C = m->C;
    os_k->copy(tmp, dhn, n * C);
    os_k->zero(dhn, N * C);
    for (int64_t i = 0; i < n; i++) os_k->copy(dhn + idx[i] * C, tmp + i * C, C);
}

void os_head_loss(const os_model *m, const os_head_weights *w, const os_head_grads *g, const os_head_task *t,
                  os_head_buf *buf, os_loss_sums *s) {
    static const os_loss_sums zero;
    int64_t N = t->B * t->L, C = m->C, V = m->V;
    memset(s, 0, sizeof *s);
    os_k->upload(buf->sums, &zero, (int64_t)sizeof zero);
    if (t->last) {
        last_logits(m, w->lm_head, t, buf);
        return;
    }
    os_head hd = {.m = m, .w = w, .g = g, .buf = buf, .N = N, .dh = g && t->dh, .logits = t->logits};
    float scale[OS_MAX_G + 1] = {0};
    // every row in the first class when the logits are wanted (fixed), else the rows with a target by class
    os_head_rows r = {.cnt = {N, 0, 0}, .nterms = t->labels ? (int)m->oc.G + 1 : 0, .hn = buf->hn, .y = buf->y,
                      .yh = buf->yh, .ldy = N, .scale = scale, .sums = buf->sums, .dhn = buf->dhn, .fixed = t->logits != NULL};
    for (int k = 0; k < r.nterms; k++) {
        s->count[k] = targets(m, t, k, buf->yh + k * N);
        scale[k] = s->count[k] && g ? t->dscale * m->oc.loss_w[k] / (float)s->count[k] : 0.0f;
    }
    int64_t *idx = NULL, n = N;
    if (r.nterms && !r.fixed) {
        idx = os_alloc(sizeof(int64_t) * (size_t)N, "head rows with a target");
        n = order_rows(m, buf->hn, buf->yh, r.nterms, N, buf->logits, idx, r.cnt);
    }
    if (r.nterms) os_k->upload(buf->y, buf->yh, (int64_t)sizeof(int32_t) * r.nterms * N);
    os_k->gemm_pin(w->lm_head, V, C, C);   // bf16 (--torch_dtype): W rounded once, not twice per logits chunk
    if (r.nterms && t->runner) t->runner->run(t->runner->ctx, &hd, &r);
    else os_head_compute(&hd, &r);
    os_k->gemm_unpin();
    if (idx && hd.dh) expand_dh(m, buf->dhn, idx, n, N, buf->logits);
    os_free(idx);
}

void os_head_read_sums(const os_head_buf *buf, os_loss_sums *s) {
    os_loss_sums d;
    os_k->download(&d, buf->sums, (int64_t)sizeof d);
    memcpy(s->sum, d.sum, sizeof d.sum), memcpy(s->correct, d.correct, sizeof d.correct);
}
