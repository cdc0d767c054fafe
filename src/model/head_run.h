// The head's run, shared by head.c (the chunks over the row classes) and head_moved.c (rows moved between ranks,
// head_balance.h); private to those two files.
#pragma once
#include "model/head_types.h"

enum { CLS_TA = OS_HEAD_CLS_TA, CLS_T = OS_HEAD_CLS_T, CLS_A = OS_HEAD_CLS_A, NCLS = OS_HEAD_NCLS };

// Rows [previous segment's end, end) are one owner's: their cross-entropies take its gradient scales and add into
// its loss sums (rows moved here from another rank, head_balance.h, are that rank's)
typedef struct {
    int64_t end;
    const float *scale;
    os_loss_sums *s;
} head_seg;

typedef struct {
    const os_model *m;
    const os_head_task *t;
    os_head_buf *buf;
    os_loss_sums *s;
    const float *W, *Wa, *ba;
    float *dW, *dWa, *dba;
    float *hn, *dhn;                       // the rows computed [n, C] and their input gradient (buf's, or moved ones)
    int64_t row0;                          // dW is computed for lm_head rows [row0, V)
    int32_t *y[OS_MAX_G + 1];              // targets per loss term, [N] each
    float scale[OS_MAX_G + 1];
    int nterms, bw, dh;                    // loss terms (0: inference), backward runs, dhn computed
    int64_t first, n, e;                   // bf16 stash: rows [first, first + n) held, e bytes per element
    int64_t srows;                         // the stash's capacity in rows
    int64_t c0[NCLS], c1[NCLS];            // each class's lm_head columns
    head_seg *seg;                         // the rows' owners, in row order
    int nseg;
} head_run;

// each class's rows in equal chunks: class c is rows [start[c], start[c] + cnt[c]) of h->hn, h->y and h->dhn; Nc
// rows in all, Nall this rank's (the buffers' chunk capacity)
void os_head_run_classes(head_run *h, const int64_t start[NCLS], const int64_t cnt[NCLS], int64_t Nc, int64_t Nall);

// Balancing (head_balance.h): every rank's class counts, the plan; when rows move, the rows out, the classes over
// this rank's kept rows and the rows moved here (os_head_run_classes), the moved rows' input gradients (into
// buf->dhn at their rows idx[i], the rows without a target zero) and loss sums back to their owner. The rows with
// a target come ordered by class, ncls[c] of class c; idx NULL: this rank's rows cannot move (the logits are
// wanted), and then no rank's do. Returns 0, having computed nothing, when no row moves.
int os_head_balanced(head_run *h, const os_head_peers *P, const int64_t ncls[NCLS], const int64_t *idx, int64_t Nall);
