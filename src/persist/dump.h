// Debug output: the reduced gradients of every trainable parameter (before clipping) as safetensors. Collective.
#pragma once
#include "zero/runtime.h"
int os_dump_grads(zr_runtime *rt, const char *path);
// logits[rows, V] of one rank (not collective)
int os_dump_logits(const char *path, const float *logits, int64_t rows, int64_t V);
