// One micro-batch of training (or evaluation) of the SLAM-Omni model: the model's forward (model/forward.h: embed ->
// decoder layers -> final norm), the loss over its output (model/loss.h: chunked lm_head + text CE + adapter + audio
// CEs, fused forward/backward; with several ranks and --head_balance its rows balanced over the ranks,
// train/head_balance.h) and the backward (norm -> layers, recomputed when checkpointing -> embedding), with the
// sharding runtime as its weight and gradient source, the speech path around it, and the parameter loss terms
// added at each gradient close. forward_only: stops after the losses.
// Gradients accumulate in the runtime, scaled by dscale (1 / (ranks * accumulation steps)).
#pragma once
#include "dataset/batch.h"
#include "train/trainer.h"

// The LoRA dropout stream of global micro-batch g (= k * ranks + rank) of optimizer step `step`: the same samples
// get the same masks on any number of ranks.
uint64_t os_lora_dropout_key(uint64_t seed, int64_t step, int64_t g);

// Forward + backward of one micro-batch; adds grads * dscale (and the param terms' grads * term_scale).
// With t->forward_only: the forward and the losses (st) only; gradients untouched, dscale unused.
void os_train_micro(os_trainer *t, const os_batch *b, float dscale, os_step_stats *st);
