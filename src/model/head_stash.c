#include "model/head_stash.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"

int64_t os_head_stash_rows(const os_model *m, int64_t N) {
    int64_t rows = k_xent_chunk_rows(m->V, N, m->logits_rows), k = (OS_HEAD_STASH_K + rows - 1) / rows * rows;
    int wgrad = m->reg.b[m->b_head].trainable || (m->b_adapter >= 0 && m->reg.b[m->b_adapter].trainable);
    if (!wgrad) k = rows;   // no weight gradient to gather rows for: each chunk's own rows (dh, dA)
    return k < N ? k : N;
}

void *os_head_stash_row(const os_head_stash *st, void *b, int64_t w) { return (char *)b + st->n * w * st->e; }

void os_head_stash_flush(os_head_stash *st, const os_head *hd, const os_head_rows *r, int64_t c0, int64_t c1) {
    const os_model *m = hd->m;
    const os_head_buf *buf = hd->buf;
    const float *W = hd->w->lm_head;
    float *dW = hd->g->lm_head, *dWa = hd->g->adapter_w;
    int64_t C = m->C, A = m->oc.audio_vocab, GA = m->oc.G * A, w = c1 - c0, row0 = dW ? hd->g->lm_head_row0 : 0;
    int64_t d0 = row0 > c0 ? row0 : c0;
    if (!st->n) return;
    if (hd->dh)
        os_k->gemm_rounded(OS_PRE_A, 0, 0, st->n, C, w, 1.0f, buf->dls, w, W + c0 * C, C, 0.0f,
                           r->dhn + st->first * C, C);
    if (dW && d0 < c1)
        os_k->gemm_rounded(OS_PRE_A, 1, 0, c1 - d0, C, st->n, 1.0f, (const char *)buf->dls + (d0 - c0) * st->e, w,
                           r->hn + st->first * C, C, 1.0f, dW + d0 * C, C);
    if (dWa && c1 > m->oc.text_vocab)
        os_k->gemm_rounded(OS_PRE_A | OS_PRE_B, 1, 0, GA, A, st->n, 1.0f, buf->als, GA, buf->ain, A, 1.0f, dWa, A);
    st->first += st->n, st->n = 0;
}
