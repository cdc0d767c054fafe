// The output head: final RMSNorm, lm_head, text cross-entropy over logits[:, :T], the group-decode adapter over
// logits[:, T:T+A] (layer shift: layer g's own columns T+g*A.., no adapter) and one cross-entropy per audio layer,
// all next-token shifted (position p predicts p+1).
// Forward and backward are fused and computed in row chunks, so the [N, V] logits and their gradient never
// exist whole. Weights come resolved (os_head_weights); the caller (model/forward.c) opens and closes the scopes
// around the three calls: norm forward (norm gathered), logits + losses (lm_head and adapter gathered, their
// gradient scopes open when training), norm backward (norm gradient scope open).
#pragma once
#include "model/head_types.h"

// the stash's capacity in rows (os_head_buf, model/head_types.h): the fewest whole logits chunks holding
// OS_HEAD_STASH_K rows (the weight-gradient products' depth: 642 rows at V = 156160, chunks of 214), at most N; one
// chunk when neither lm_head nor the adapter trains (nothing to gather rows for). The head empties it when the next
// chunk would not fit and at the end of each class of rows (head.c), so a flush may hold fewer.
#define OS_HEAD_STASH_K 512
int64_t os_head_stash_rows(const os_model *m, int64_t N);

// hn, rstd = rmsnorm(x[N, C])
void os_head_norm_fwd(const os_model *m, const float *norm, const float *x, int64_t N, os_head_buf *buf);
// logits of hn, the losses (added into s) and, with g, their backward into g and (t->dh) buf->dhn; with labels
// and no t->logits, hn and y come back reordered (the rows grouped by their targets' class, head.c)
void os_head_loss(const os_model *m, const os_head_weights *w, const os_head_grads *g, const os_head_task *t,
                  os_head_buf *buf, os_loss_sums *s);
// dx[N, C] = dL/dx through the final norm from buf->dhn (overwritten); dnorm += its weight gradient
void os_head_norm_bwd(const os_model *m, const float *norm, float *dnorm, const float *x, int64_t N,
                      const os_head_buf *buf, float *dx);
