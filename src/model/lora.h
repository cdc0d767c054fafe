// LoRA on one linear layer W [O, I] over N rows (docs/training.md "LoRA"), PEFT's formula:
//   y[N,O] += s * dropout(x)[N,I] @ A[r,I]^T @ B[O,r]^T,   s = alpha / r
// Dropout (p > 0, training only): element (n, i) is kept with probability 1 - p and scaled by 1 / (1 - p); the
// keep mask is value n*I + i of the counter-RNG stream `key`, so a recomputed forward and the backward see the same
// mask, and N ranks see what 1 rank sees (the key names the step's global micro-batch, the layer and the module).
#pragma once
#include "core/tensor.h"
#include <stdint.h>

typedef struct {
    int64_t N, I, O, r;
    float s, p;       // scale alpha / r, dropout probability
    uint64_t key;     // dropout stream (unused when p == 0)
    float *xd;        // scratch [N, I] for the dropped input (p > 0)
    float *uf;        // scratch [N, r] where a bf16 u is produced (fp32) before it is rounded into its store
} os_lora_op;

// u[N,r] = s * dropout(x) @ A^T (kept for the backward); y (may be NULL: u only) += u @ B^T
// x [N, I] a view (fp32, or bf16 without dropout: dropout reads fp32); A [r, I] and B [O, r] are views as the owner gives them (fp32, or bf16 under bf16 mixed precision)
// u [N, r] a view: fp32 (computed in place), or bf16 (computed in op->uf, then rounded once into it by cast: its
// two readers, the B product here and dB's in the backward, are products that round it)
void os_lora_fwd(const os_lora_op *op, os_tensor x, os_tensor A, os_tensor B, os_tensor u, float *y);
// from dy[N,O] (a view: fp32, or bf16 where the layer stores it so): dB[O,r] += dy^T @ u;  du = s * dy @ B;  dA[r,I] += du^T @ dropout(x);  dx[N,I] += dropout'(du @ A).
// du: scratch [N, r].
void os_lora_bwd(const os_lora_op *op, os_tensor x, os_tensor A, os_tensor B, os_tensor u, os_tensor dy,
                 float *du, float *dA, float *dB, float *dx);
