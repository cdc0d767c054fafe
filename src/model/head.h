// The output head: final RMSNorm, lm_head, text cross-entropy over logits[:, :T], the group-decode adapter over
// logits[:, T:T+A] (layer shift: layer g's own columns T+g*A.., no adapter) and one cross-entropy per audio layer,
// all next-token shifted (position p predicts p+1).
// Forward and backward are fused and computed in row chunks, so the [N, V] logits and their gradient never
// exist whole. Weights come resolved (os_head_weights); the caller (model/forward.c) opens and closes the scopes
// around the three calls: norm forward (norm gathered), logits + losses (lm_head and adapter gathered, their
// gradient scopes open when training), norm backward (norm gradient scope open).
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

// the stash's capacity in rows (above): the fewest whole logits chunks holding OS_HEAD_STASH_K rows (the
// weight-gradient products' depth: 642 rows at V = 156160, chunks of 214), at most N; one chunk when neither
// lm_head nor the adapter trains (nothing to gather rows for). The head empties it when the next chunk would not
// fit and at the end of each class of rows (head.c), so a flush may hold fewer.
#define OS_HEAD_STASH_K 512
int64_t os_head_stash_rows(const os_model *m, int64_t N);

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

// hn, rstd = rmsnorm(x[N, C])
void os_head_norm_fwd(const os_model *m, const float *norm, const float *x, int64_t N, os_head_buf *buf);
// logits of hn, the losses (added into s) and, with g, their backward into g and (t->dh) buf->dhn; with labels
// and no t->logits, hn and y come back reordered (the rows grouped by their targets' class, head.c)
void os_head_loss(const os_model *m, const os_head_weights *w, const os_head_grads *g, const os_head_task *t,
                  os_head_buf *buf, os_loss_sums *s);
// dx[N, C] = dL/dx through the final norm from buf->dhn (overwritten); dnorm += its weight gradient
void os_head_norm_bwd(const os_model *m, const float *norm, float *dnorm, const float *x, int64_t N,
                      const os_head_buf *buf, float *dx);
