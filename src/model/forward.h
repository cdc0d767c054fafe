// The SLAM-Omni model's forward and backward up to the loss, the one path that training (train/step.c), evaluation
// (forward only) and inference (with a KV cache) call:
//   os_model_forward:  embedding (mean of the G+1 rows, speech splice: model/embed.h) -> decoder layers
//                      (model/layer.h) -> final norm: hn [N, C] (a->hn), the loss's input (model/loss.h)
//   os_model_backward: from the loss's dL/dhn (a->dhn): final norm backward -> decoder layers backward (recomputed
//                      with o->recompute) -> embedding backward
// Weights are reached through os_weights and gradients through os_grads (model/weights.h), in a fixed order of
// bucket scopes that depends on the model only (ZeRO-3 gathers each layer once per pass and prefetches the next):
//   forward:  embed; layer 0 .. nl-1 (each with its LoRA bucket); norm (the loss's buckets prefetched beside the
//             last layer when training)
//   backward: norm (gathered, gradient scope); layer nl-1 .. 0 (gathered, gradient scope); embedding gradient scope
// The model knows nothing of where the weights live or how they are sharded.
#pragma once
#include "model/activations.h"
#include "model/weights.h"

typedef struct {
    int64_t B, R, L;             // samples, rows per sample (G+1), positions; N = B*L
    const int32_t *ids;          // [B, R, L] input ids (audio rows shifted by +T)
    const uint8_t *keymask;      // [B, L] 1 = real position, 0 = padding; NULL: all real (required with a KV cache)
    const int32_t *seg;          // [B, L] segment ids of packed samples (attention stays inside one); NULL: one per row
    const int32_t *pos;          // [B, L] RoPE positions (packed rows restart them per sample); NULL: 0..L-1 each row
    const uint8_t *speech;       // [B, L] 1 = speech position (filled by the projector); NULL: none
    const float *proj;           // [*, C] the projector outputs (NULL: no speech)
    float *dproj;                // [*, C] their gradient, filled by the embedding backward (NULL: not wanted)
    const int64_t *proj_at;      // [B] sample b's j-th speech position takes row proj_at[b] + j of proj and dproj
                                 // (-1: the sample has no speech; NULL when proj is)
    // (ids, keymask, seg, speech, proj_at: host memory, the kernels read ids/keymask/seg uploaded by the forward;
    // proj and dproj point at the backend's memory)
} os_model_input;

typedef struct {
    // training (grads NULL: forward only, e.g. evaluation and inference: no gradient scope is opened)
    const os_grads *grads;
    int recompute;               // keep one layer's activations, recompute each layer in the backward
    float lora_dropout;          // LoRA dropout probability (0 without training)
    uint64_t lora_key;           // the micro-batch's dropout stream
    // inference
    os_kv_cache *kv;             // NULL: none. Else the rows are positions [kv->len, kv->len + L), attend to the
                                 //   cached ones too, append their K/V; kv->len += L after the forward
    os_kv_cache *const *kvs;     // NULL, or [B] one cache per sample (kv NULL, L = 1; ragged lengths, B = 1 each):
                                 //   sample b's row is position kvs[b]->len of its sequence, attends to that
                                 //   cache only; each len += 1 after the forward
} os_model_opts;

// KV cache for B samples of up to cap positions (os_kv_cache in model/layer.h: K, V [nlayers, B, cap, KH, D])
void os_kv_cache_init(os_kv_cache *kv, const os_model *m, int64_t B, int64_t cap);
void os_kv_cache_free(os_kv_cache *kv);

// Embedding, layers, final norm: a->hn [N, C].
void os_model_forward(os_model_acts *a, const os_model_input *in, const os_weights *w, const os_model_opts *o);
// After a training forward and the loss's dL/dhn in a->dhn (something below the loss trains): final norm, layers
// and embedding backward (gradients via o->grads; speech positions' projector gradient into in->dproj).
void os_model_backward(os_model_acts *a, const os_model_input *in, const os_weights *w, const os_model_opts *o);
