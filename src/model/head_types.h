// The head's data types (model/head.h has the head's functions and its description): its weights, gradients,
// loss sums, buffers and the task of one call.
#pragma once
#include "model/head_balance.h"
#include "model/omni.h"

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
    int64_t moved;   // rows with a target this rank's head sent to another rank (head_balance.h)
} os_loss_sums;

// the head's buffers (sizes: model/activations.c): hn [N, C], rstd [N], logits [rows, V] (at least [N, C]: also
// the scratch of the head's row order), al [rows, G*A] and dA [rows, A] (adapter), dhn [N, C] (dL/d norm output;
// training below the head), y [(G+1), N] targets; rows = k_xent_chunk_rows(V, N).
// Training while the products round their inputs (bf16, os_k->gemm_rounds() bytes per element): the rounded
// gradients of srows = os_head_stash_rows rows, so that the input gradient (dhn) and the weight gradients are one
// product over all of them, not one per logits chunk: dls [srows, V] (dlogits), als [srows, G*A] (adapter output
// gradient), ain [srows, A] (adapter input); NULL otherwise.
typedef struct {
    float *hn, *rstd, *logits, *al, *dA, *dhn;
    int32_t *y;
    void *dls, *als, *ain;
} os_head_buf;

typedef struct {
    int64_t B, R, L;           // micro-batch shape, N = B*L rows
    const int32_t *labels;     // [B, R, L] raw labels or -100; NULL: no losses (inference)
    float dscale;              // gradient scale of the losses (with gradients)
    int dh;                    // compute dL/d(norm output) into buf->dhn (something below the head is trained)
    float *logits;             // NULL, or receives lm_head logits: every row [N, V], or with `last` (labels NULL
    int last;                  //   only) each sample's last row [B, V]
    const os_head_peers *peers;   // NULL, or the other ranks: rows with a target move to even out the head's work
                                  //   (head_balance.h; every rank calls os_head_loss at the same point)
} os_head_task;
