// The head's computation over given rows (os_head_rows, model/head_types.h): for each class of rows, in chunks of
// equal size, the chunk's lm_head logits over the columns its class needs, the cross-entropies (each row with its
// owner's gradient scales, into its owner's sums), the group-decode adapter over the audio columns, and with
// gradients their backward: dL/dhn of the rows and the weight gradients of lm_head and the adapter (bf16: through
// the stash, model/head_stash.h). The rows may be any rows with their targets: model/head.c gives the micro-batch's
// own, train/head_balance.c adds rows moved from other ranks. Nothing here knows where a row came from.
#pragma once
#include "model/head_types.h"

// lm_head columns [c0, c1) of class c: text and audio every column, text [0, T), audio [T, V)
void os_head_class_cols(const os_model *m, int c, int64_t *c0, int64_t *c1);
// the work of one row of each class in hd: its products (logits, dh, dW, the adapter's three) in multiply-adds,
// and the cross-entropy's passes over its columns; at least 1
void os_head_row_costs(const os_head *hd, double cost[OS_HEAD_NCLS]);
// r's losses into r->sums, with hd->g the weight gradients (+=) and with hd->dh r->dhn; logits chunks of
// k_xent_chunk_rows(V, min(n, hd->N), m->logits_rows) rows at most
void os_head_compute(const os_head *hd, const os_head_rows *r);
