// One Qwen2 decoder layer, forward and backward, on N = B*L rows:
//   h = x + o_proj(attn(rope(q(ln1 x)), rope(k(ln1 x)), v(ln1 x)));  y = h + down(silu(gate(ln2 h)) * up(ln2 h))
// With LoRA every targeted projection adds its low-rank term (train/lora.h); the layer's LoRA bucket must then be
// gathered (and its gradient scope open in the backward) together with the layer's bucket.
#pragma once
#include "model/omni.h"
#include "dataset/batch.h"
#include "zero/runtime.h"

typedef struct {
    const os_model *m;
    int64_t B, L, N;
    float *cos_t, *sin_t;    // RoPE tables [L, D/2] for positions 0..L-1
    const uint8_t *keymask;  // [B, L]
    // backward scratch
    float *dact, *dgate, *dup, *dln, *dao, *dq, *dk, *dv;
    // LoRA (train/lora.h): du [N, r], dropped input [N, max I] (dropout > 0), dropout probability (0 in evaluation)
    // and the micro-batch's dropout stream (set by the caller after init)
    float *lora_du, *lora_xd, lora_p;
    uint64_t lora_key;
} os_layer_ctx;

// saved activations of one layer (N rows)
typedef struct {
    float *ln1, *rstd1, *q, *k, *v, *att, *ao, *h, *ln2, *rstd2, *gate, *up, *act;
    float *lora_u[OS_LORA_N];   // s * dropout(x) @ A^T [N, r] per targeted module
} os_layer_act;

// lora_dropout: the LoRA dropout probability to apply (0 in evaluation)
void os_layer_ctx_init(os_layer_ctx *c, const os_model *m, const os_batch *b, float lora_dropout);
void os_layer_ctx_free(os_layer_ctx *c);
void os_layer_act_alloc(os_layer_act *a, const os_layer_ctx *c);
void os_layer_act_free(os_layer_act *a);
// x[N,C] -> y[N,C] (y may be NULL: recompute the activations only). Layer l's bucket must be gathered.
void os_layer_fwd(const os_layer_ctx *c, int l, zr_runtime *rt, const float *x, os_layer_act *a, float *y);
// dx[N,C]: on entry dL/dy, on exit dL/dx. Layer l's bucket gathered and its gradient scope open.
void os_layer_bwd(const os_layer_ctx *c, int l, zr_runtime *rt, const float *x, const os_layer_act *a, float *dx);
