// The output head: final RMSNorm, lm_head, text cross-entropy over logits[:, :T], the group-decode adapter over
// logits[:, T:T+A] (layer shift: layer g's own columns T+g*A.., no adapter) and one cross-entropy per audio layer,
// all next-token shifted (position p predicts p+1).
// Forward and backward are fused and computed in row chunks, so the [N, V] logits and their gradient never
// exist whole. Gradients go to lm_head, the adapter, the final norm; dx[N,C] receives dL/d(last layer output).
// With t->forward_only only the losses are computed (no gradient scope is opened; dx is unused and may be NULL).
// dx NULL in training: nothing below the head is trained (freezing), so dL/dx and the norm backward are skipped.
// Frozen lm_head / adapter get no gradient (zr_grad gives NULL).
#pragma once
#include "dataset/batch.h"
#include "train/trainer.h"

void os_head_fwd_bwd(os_trainer *t, const os_batch *b, const float *x, float *dx, float dscale, os_step_stats *st);
