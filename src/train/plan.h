// Per-rank memory of a training configuration, computed from the parameter registry and the table of the
// forward/backward's buffers (os_acts_sizes, model/activations.h: the one the allocator lays out): model state by stage, gather/gradient
// buffers of the sharding runtime, and activations with or without recomputation. Frozen buckets
// (src/model/freeze.h) hold no gradient and no optimizer state.
#pragma once
#include "model/omni.h"
#include <stdint.h>

typedef struct {
    int64_t params, optim;             // permanent model state on one rank
    int64_t grads;                     // gradients held at the peak (stage 2/3: the slices reduced so far)
    int64_t gather;                    // gathered parameter buckets + full gradient buckets at the peak
    int64_t activations;               // activations + scratch at the peak
    int64_t total;
} os_plan;

// accum: micro-batches per optimizer step (gradient accumulation; > 1 keeps every gradient slice for the whole step)
void os_plan_compute(const os_model *m, int nranks, int stage, int64_t batch, int64_t seq, int recompute, int64_t accum,
                     os_plan *p);
// bf16 mixed precision (--torch_dtype bfloat16): the bytes of the rounded GEMM inputs held at the peak (the
// largest operands, kept by src/kernels/gemm_bf16.c), on the oneDNN path (onednn 1) or the sgemm fallback (0)
int64_t os_plan_bf16(const os_model *m, int64_t batch, int64_t seq, int onednn);
// built-in Qwen2.5 configurations ("qwen2.5-0.5b", "-1.5b", "-3b", "-7b"); 0 or -1 if unknown
int os_plan_preset(const char *name, os_qwen2_config *c);
