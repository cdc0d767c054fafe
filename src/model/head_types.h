// The head's data types (model/head.h has the head's functions and its description): its weights, gradients,
// loss sums, buffers, the rows of one computation and the task of one call.
#pragma once
#include "model/omni.h"

// the row classes: targets in the text and the audio terms, the text term only, the audio terms only (head.h)
enum { OS_HEAD_CLS_TA, OS_HEAD_CLS_T, OS_HEAD_CLS_A, OS_HEAD_NCLS };

// final_norm [C]; lm_head [V, C]; adapter_w [G*A, A], adapter_b [G*A] (NULL: no adapter)
typedef struct {
    const float *norm, *lm_head, *adapter_w, *adapter_b;
} os_head_weights;

// gradients, accumulated (+=); NULL: not computed (frozen, or evaluation). lm_head_row0: lm_head is trained on
// rows [row0, V) only (--trainable_embed_rows), the rest of its gradient is not computed.
typedef struct {
    float *norm, *lm_head, *adapter_w, *adapter_b;
    int64_t lm_head_row0;
} os_head_grads;

// per loss term (0 text, 1+g audio layer g): summed CE, valid targets, correct argmax
typedef struct {
    double sum[OS_MAX_G + 1];
    int64_t count[OS_MAX_G + 1], correct[OS_MAX_G + 1];
} os_loss_sums;

// the head's buffers (sizes: model/activations.c): hn [N, C], rstd [N], logits [rows, V] (at least [N, C]: also
// the scratch of the head's row order), al [rows, G*A] and dA [rows, A] (adapter), dhn [N, C] (dL/d norm output;
// training below the head), y [(G+1), N] targets; rows = k_xent_chunk_rows(V, N, m->logits_rows).
// Training while the products round their inputs (bf16, os_k->gemm_rounds() bytes per element): the stash
// (model/head_stash.h) of srows = os_head_stash_rows rows: dls [srows, V] (dlogits), als [srows, G*A] (adapter
// output gradient), ain [srows, A] (adapter input); NULL otherwise.
// sums: the micro-batch's loss sums and correct counts on the backend's memory (the cross-entropy adds into them;
// os_head_read_sums brings them to the host), allocated with the activations (os_acts_init).
// yh: y's copy on the host (not in the arena: the targets are made, ordered and classed there, then uploaded)
typedef struct {
    float *hn, *rstd, *logits, *al, *dA, *dhn;
    int32_t *y, *yh;
    void *dls, *als, *ain;
    os_loss_sums *sums;
} os_head_buf;

// The head of one micro-batch: the model, its resolved weights and gradients, its buffers.
typedef struct {
    const os_model *m;
    const os_head_weights *w;
    const os_head_grads *g;   // NULL: forward only (the losses)
    os_head_buf *buf;
    int64_t N;                // the micro-batch's rows B*L: the buffers' capacity (logits chunk, stash)
    int dh;                   // compute dL/dhn (something below the head is trained; with g only)
    float *logits;            // NULL, or receives every row's lm_head logits [N, V] (the rows in their order; host
                              //   memory: each chunk downloaded, a wait per chunk: a debugging dump)
} os_head;

// Rows for the head to compute, grouped by class: class c is cnt[c] rows, after the earlier classes'; n rows in
// all. Row r is the final norm's output hn[r] with the targets y[k * ldy + r] of each loss term k < nterms, and
// belongs to owner[r] (NULL: every row to owner 0): its cross-entropies take that owner's gradient scales
// scale[owner * (OS_MAX_G + 1) + k] and add into its sums[owner]. A row moved here from another rank is one more
// owner (train/head_balance.c), computed like any other.
typedef struct {
    int64_t cnt[OS_HEAD_NCLS];
    int nterms;                // loss terms (G+1), 0: no losses (logits only)
    const float *hn;           // [n, C]
    const int32_t *y;          // [nterms, ldy] (the backend's memory)
    const int32_t *yh;         // the same targets on the host (what code on the host reads: the balanced head)
    int64_t ldy;
    const int *owner;          // [n] or NULL
    const float *scale;        // [owners, OS_MAX_G + 1]
    os_loss_sums *sums;        // [owners], on the backend's memory
    float *dhn;                // [n, C]: dL/dhn of each row, written with hd->dh
    int fixed;                 // the rows are the micro-batch's, in order, their logits wanted: they cannot move
} os_head_rows;

// Computes the rows r: os_head_compute(hd, r), alone or beside other rows (train/head_balance.h moves rows
// between ranks), so that r->sums get r's losses and r->dhn r's input gradients as os_head_compute gives them.
typedef struct {
    void *ctx;
    void (*run)(void *ctx, const os_head *hd, const os_head_rows *r);
} os_head_runner;

typedef struct {
    int64_t B, R, L;           // micro-batch shape, N = B*L rows
    const int32_t *labels;     // [B, R, L] raw labels or -100; NULL: no losses (inference)
    float dscale;              // gradient scale of the losses (with gradients)
    int dh;                    // compute dL/d(norm output) into buf->dhn (something below the head is trained)
    float *logits;             // NULL, or receives lm_head logits (host memory: downloaded): every row [N, V], or
                               //   with `last` (labels NULL
    int last;                  //   only) each sample's last row [B, V]
    const os_head_runner *runner;   // NULL, or computes the rows with losses (os_head_runner)
} os_head_task;
