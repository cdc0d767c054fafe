// The SLAM-Omni model's forward and backward, the one path that training (train/step.c), evaluation (forward
// only) and inference (with a KV cache) call:
//   embedding (mean of the G+1 rows, speech splice: model/embed.h) -> decoder layers (model/layer.h) -> final
//   norm -> lm_head in row chunks with the text and audio cross-entropies, their backward fused (model/head.h)
//   os_model_backward: decoder layers backward (recomputed with o->recompute) -> embedding backward
// Weights are reached through os_weights and gradients through os_grads (model/weights.h), in a fixed order of
// bucket scopes that depends on the model only (ZeRO-3 gathers each layer once per pass and prefetches the next):
//   forward:  embed; layer 0 .. nl-1 (each with its LoRA bucket); norm, head (+ gradient), adapter (+ gradient);
//             [norm gradient when o->below]
//   backward: layer nl-1 .. 0 (gathered, gradient scope); embedding gradient scope
// The model knows nothing of where the weights live or how they are sharded.
#pragma once
#include "model/activations.h"
#include "model/weights.h"

typedef struct {
    int64_t B, R, L;             // samples, rows per sample (G+1), positions; N = B*L
    const int32_t *ids;          // [B, R, L] input ids (audio rows shifted by +T)
    const int32_t *labels;       // [B, R, L] raw labels or -100; NULL: no losses (inference)
    const uint8_t *keymask;      // [B, L] 1 = real position, 0 = padding; NULL: all real (required with a KV cache)
    const int32_t *seg;          // [B, L] segment ids of packed samples (attention stays inside one); NULL: one per row
    const int32_t *pos;          // [B, L] RoPE positions (packed rows restart them per sample); NULL: 0..L-1 each row
    const uint8_t *speech;       // [B, L] 1 = speech position (filled by the projector); NULL: none
    const float *const *proj;    // [B] each sample's projector output [T_s, C] (NULL entry or NULL: no speech)
    float *const *dproj;         // [B] its gradient, filled by the embedding backward (NULL: not wanted)
    // (ids, labels, keymask, seg, speech: host memory, the kernels read ids/keymask/seg uploaded by the forward;
    // proj and dproj point at the backend's memory)
} os_model_input;

typedef struct {
    // training (grads NULL: forward only, e.g. evaluation and inference: no gradient scope is opened)
    const os_grads *grads;
    float dscale;                // gradient scale of the losses
    int below;                   // something below the head is trained: dL/dx flows down (os_model_backward follows)
    int recompute;               // keep one layer's activations, recompute each layer in the backward
    float lora_dropout;          // LoRA dropout probability (0 without training)
    uint64_t lora_key;           // the micro-batch's dropout stream
    const os_head_runner *head_runner;   // NULL, or computes the head's rows with losses (model/head_types.h:
                                         //   train/head_balance.h moves them between ranks)
    // inference
    os_kv_cache *kv;             // NULL: none. Else the rows are positions [kv->len, kv->len + L), attend to the
                                 //   cached ones too, append their K/V; kv->len += L after the forward
    os_kv_cache *const *kvs;     // NULL, or [B] one cache per sample (kv NULL, L = 1; ragged lengths, B = 1 each):
                                 //   sample b's row is position kvs[b]->len of its sequence, attends to that
                                 //   cache only; each len += 1 after the forward
    float *logits;               // NULL, or the lm_head logits (host memory: downloaded): [N, V] every row, or with
                                 //   logits_last (labels NULL)
    int logits_last;             //   each sample's last position [B, V]
} os_model_opts;

// KV cache for B samples of up to cap positions (os_kv_cache in model/layer.h: K, V [nlayers, B, cap, KH, D])
void os_kv_cache_init(os_kv_cache *kv, const os_model *m, int64_t B, int64_t cap);
void os_kv_cache_free(os_kv_cache *kv);

// Embedding, layers and head: losses into s (with labels), logits (when asked), the head's gradients (o->grads)
// and with o->below dL/d(last layer output) kept in a->dx for os_model_backward.
void os_model_forward(os_model_acts *a, const os_model_input *in, const os_weights *w, const os_model_opts *o,
                      os_loss_sums *s);
// After a training forward with o->below: layers and embedding backward (gradients via o->grads; speech
// positions' projector gradient into in->dproj).
void os_model_backward(os_model_acts *a, const os_model_input *in, const os_weights *w, const os_model_opts *o);
