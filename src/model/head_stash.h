// bf16 training's stash of the head's rounded gradients (the buffers dls, als, ain of os_head_buf). While the
// products round their inputs, each logits chunk's dlogits (and the adapter's output gradient and input) are
// rounded once into the stash, and the products that read them run once over all the stash's rows, not once per
// chunk: dhn = dlogits @ W[c0:c1] (W packed once for all of them), dW[max(row0, c0):c1] += dlogits^T hn and
// dWa += dal^T a. The stash holds rows of one class (columns [c0, c1), stash row stride c1 - c0); the head
// empties it when the next chunk would not fit and at the end of each class (model/head.c).
#pragma once
#include "model/head_types.h"

// the stash's capacity in rows: the fewest whole logits chunks holding OS_HEAD_STASH_K rows (the weight-gradient
// products' depth: 642 rows at V = 156160, chunks of 214), at most N; one chunk when neither lm_head nor the
// adapter trains (nothing to gather rows for). A flush may hold fewer.
#define OS_HEAD_STASH_K 512
int64_t os_head_stash_rows(const os_model *m, int64_t N);

// rows [first, first + n) of the rows computed are in the stash, e bytes per element, cap rows at most
typedef struct {
    int64_t first, n, e, cap;
} os_head_stash;

// where the next chunk's rows start in stash buffer b of w elements per row
void *os_head_stash_row(const os_head_stash *st, void *b, int64_t w);
// the stash's products over its rows of rows r (columns [c0, c1)); then it is empty, the next row after them
void os_head_stash_flush(os_head_stash *st, const os_head *hd, const os_head_rows *r, int64_t c0, int64_t c1);
