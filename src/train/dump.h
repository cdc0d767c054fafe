// Debug output: the reduced gradients of every trainable parameter (before clipping) as safetensors. Collective.
#pragma once
#include "model/omni.h"
#include "zero/runtime.h"
int os_dump_grads(const os_model *m, zr_runtime *rt, const char *path);
