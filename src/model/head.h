// The output head: final RMSNorm, lm_head, text cross-entropy over logits[:, :T], the group-decode adapter over
// logits[:, T:T+A] (layer shift: layer g's own columns T+g*A.., no adapter) and one cross-entropy per audio layer,
// all next-token shifted (position p predicts p+1).
// Forward and backward are fused and computed in row chunks, so the [N, V] logits and their gradient never
// exist whole. Row classes: which loss terms a row has targets in, and so which lm_head columns it needs. The text
// cross-entropy reads columns [0, T), the audio ones [T, V) (V = T + A through the adapter, or T + G*A with the
// layer shift, layer g its own A columns: model/omni.c sizes V so, so every column is read by some loss). A row
// without a text target never needs the 152000 text columns, one without an audio target neither the audio columns
// nor the adapter (in SLAM-Omni: most answer positions are past the text's eot, audio only). os_head_loss takes the
// rows with a target, groups them by class (text and audio, text only, audio only: OS_HEAD_CLS_*) and hands them
// to os_head_compute (model/head_compute.h), or to the task's runner, which computes them beside other rows.
// Weights come resolved (os_head_weights); the caller (model/forward.c) opens and closes the scopes around the
// three calls: norm forward (norm gathered), logits + losses (lm_head and adapter gathered, their gradient scopes
// open when training), norm backward (norm gradient scope open).
#pragma once
#include "model/head_types.h"

// hn, rstd = rmsnorm(x[N, C])
void os_head_norm_fwd(const os_model *m, const float *norm, const float *x, int64_t N, os_head_buf *buf);
// logits of hn, the losses (s: the targets' counts; the sums and correct counts stay in buf->sums until
// os_head_read_sums) and, with g, their backward into g and (t->dh) buf->dhn; with labels and no
// t->logits, hn and y come back reordered (the rows grouped by their targets' class)
void os_head_loss(const os_model *m, const os_head_weights *w, const os_head_grads *g, const os_head_task *t,
                  os_head_buf *buf, os_loss_sums *s);
// the last os_head_loss's sums and correct counts into s (its counts as they are): waits for the head's kernels
void os_head_read_sums(const os_head_buf *buf, os_loss_sums *s);
// dx[N, C] = dL/dx through the final norm from buf->dhn (overwritten); dnorm += its weight gradient
void os_head_norm_bwd(const os_model *m, const float *norm, float *dnorm, const float *x, int64_t N,
                      const os_head_buf *buf, float *dx);
