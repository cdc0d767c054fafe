// One Qwen2 decoder layer, forward and backward, on N = B*L rows:
//   h = x + o_proj(attn(rope(q(ln1 x)), rope(k(ln1 x)), v(ln1 x)));  y = h + down(silu(gate(ln2 h)) * up(ln2 h))
// With LoRA every targeted projection adds its low-rank term (model/lora.h).
// The layer computes from resolved weights (os_layer_weights) and knows nothing of where they live; the caller
// (model/forward.c) resolves them inside the owner's scopes. Buffers come from the run's activations
// (model/activations.h).
#pragma once
#include "model/omni.h"

// Layer weights, PyTorch layouts: ln1/ln2 [C]; q_w [H*D, C], q_b [H*D]; k_w/v_w [KH*D, C], k_b/v_b [KH*D];
// o_w [C, H*D]; gate/up [F, C]; down [C, F]; LoRA lora_a[t] [r, I], lora_b[t] [O, r] (data NULL: module t not
// targeted). Tensor views as the owner gives them (os_weights.tensor): the vectors fp32, the matrices fp32 or, under
// bf16 mixed precision, the bf16 copy the owner keeps. (The members are OS_LAYER_TENSORS, model/omni.h, in that order.)
typedef struct {
    OS_LAYER_TENSORS(OS_LAYER_FIELD, os_tensor)
    os_tensor lora_a[OS_LORA_N], lora_b[OS_LORA_N];
} os_layer_weights;

// Their gradients, same shapes, accumulated (+=). A NULL member is not computed (frozen).
typedef struct {
    OS_LAYER_TENSORS(OS_LAYER_FIELD, float *)
    float *lora_a[OS_LORA_N], *lora_b[OS_LORA_N];
} os_layer_grads;

// The keys and values of earlier positions (inference): per layer K and V [B, cap, KH, D] (position-major, the
// layout of the layer's own k/v rows); positions [0, len) hold values. The caller may set len back (to 0: a new
// sequence; to a shared prefix's length: reuse it); the next forward overwrites from there.
typedef struct {
    int64_t nlayers, B, cap, KH, D;
    int64_t len;      // positions cached
    float *k, *v;     // [nlayers, B, cap, KH, D]
} os_kv_cache;

// What a layer call works on: the micro-batch shape, the RoPE tables, the mask, backward scratch.
typedef struct {
    const os_model *m;
    int64_t B, L, N;
    int64_t p0;                   // position of row 0 (0 unless a KV cache holds earlier positions)
    const float *cos_t, *sin_t;   // RoPE tables [>= p0 + L, D/2] for positions 0, 1, ... (rope_ld 0), or one
    int64_t rope_ld;              //   table [L, D/2] per row, rope_ld = L*D/2 floats apart (packed rows)
    const uint8_t *keymask;       // [B, L] (NULL: all real)
    const int32_t *seg;           // [B, L] segment ids: packed samples never attend to each other (NULL: one per row)
    os_kv_cache *kv;              // NULL: attention over the L rows only
    os_kv_cache *const *kvs;      // NULL, or [B] one cache per sample (L = 1, kv NULL): row b is position
                                  //   kvs[b]->len of sample b (ragged lengths), attending to its own cache only
    // backward scratch
    float *dact, *dgate, *dup, *dln, *dao, *dq, *dk, *dv;
    // LoRA (model/lora.h): du [N, r], dropped input [N, max I] (dropout > 0), dropout probability (0 in evaluation)
    // and the micro-batch's dropout stream
    float *lora_du, *lora_xd, lora_p;
    uint64_t lora_key;
} os_layer_ctx;

// saved activations of one layer (N rows): ln1/h/ln2 [N, C], rstd1/rstd2 [N], q/ao [N, H*D], k/v [N, KH*D],
// att: the attention stats, os_k->attention_stats_floats(B, L, H) floats (unused with a KV cache), gate/up/act [N, F]
typedef struct {
    float *ln1, *rstd1, *q, *k, *v, *att, *ao, *h, *ln2, *rstd2, *gate, *up, *act;
    // bf16 stores of ln1, ln2 [N, C] and act [N, F] (NULL: none): each is rounded once where it is produced and its
    // products read the bf16 rows; ln1/ln2/act are then the fp32 scratch it is produced in (the backward's dln and
    // dact, free during the forward) and not read again. model/activations.c gives them under bf16 training where
    // no fp32 consumer (LoRA dropout) reads the activation (docs/design.md "Activations: which are stored bf16")
    void *ln1h, *ln2h, *acth;
    float *lora_u[OS_LORA_N];   // s * dropout(x) @ A^T [N, r] per targeted module
    // its bf16 store (NULL: none): under bf16 training u is produced in the backward's lora_du scratch (lora_u then
    // points there), rounded once into it, and its two products (B's forward, dB) read the bf16 rows
    void *lora_uh[OS_LORA_N];
} os_layer_act;

// x[N,C] -> y[N,C] (y may be NULL: recompute the activations only). l: the layer's index (its LoRA dropout stream
// and its KV cache slot). With c->kv the rows are positions [p0, p0+L) and also attend to the cached positions
// [0, p0); their K/V are written at [p0, p0+L). With c->kvs the same per sample, each at its own position.
void os_layer_fwd(const os_layer_ctx *c, int l, const os_layer_weights *w, const float *x, os_layer_act *a, float *y);
// dx[N,C]: on entry dL/dy, on exit dL/dx; gradients accumulate into g.
void os_layer_bwd(const os_layer_ctx *c, int l, const os_layer_weights *w, const os_layer_grads *g, const float *x,
                  const os_layer_act *a, float *dx);
