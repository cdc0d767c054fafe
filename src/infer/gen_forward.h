// The model forward of generation (omnishard infer, infer/infer.h) through os_model_forward (model/forward.h) and
// the loss's logits (os_loss_logits, model/loss.h):
//   KV cache on: the prompt once (prefill, the speech encoder and projector with it), then one position per step
//   that attends to the cached keys and values;
//   off: the whole sequence again at every step (the check of the cache: the same tokens, tests/test_infer.py).
// Forward only: no labels, no gradient scope; one layer's activations are kept. Collective: every rank runs the
// same forwards (any ZeRO stage) and gets the last position's lm_head logits.
#pragma once
#include "model/forward.h"
#include "session/model_runtime.h"
#include "session/session.h"

typedef struct {
    os_session *s;
    int64_t R, P, cap;        // rows (G+1), prompt positions, positions at most
    const uint8_t *speech;    // the prompt's speech mask [P] (NULL: none)
    int cached;               // KV cache on
    int batched;              // the speech path ran beforehand (os_gen_opts.speech_batched): its output is proj
    const float *proj;        //   [T_s, C] (NULL: no speech)
    os_kv_cache kv;
    int32_t *ids;             // [R, cap] the rows one forward reads
    uint8_t *mask;            // [cap] its speech mask
    float *z;                 // [V] the last position's logits
    int64_t positions;        // positions run through the decoder so far (all forwards)
} os_gen_fwd;

// R rows (G+1), a prompt of P positions with speech mask speech[P] (NULL: none), at most cap positions
void os_gen_fwd_init(os_gen_fwd *f, os_session *s, int64_t R, int64_t P, const uint8_t *speech, int64_t cap, int cached);
// seq [R rows of stride f->cap] holds positions [0, L) (L <= cap; with the cache, L is 1 more than at the previous
// call, or the prompt at the first): returns the lm_head logits [V] of position L-1.
const float *os_gen_fwd_next(os_gen_fwd *f, const int32_t *seq, int64_t L);
// Batched decoding (infer/infer_batch.c): n sequences at once, each with its own cache (f[b], cached, prefilled by
// os_gen_fwd_next): tok [n, R] the rows of each sequence's new position, which attends to that sequence's cache
// (ragged lengths); the products of the layers and the head see n rows. z: the lm_head logits [n, V].
#define OS_GEN_MAX_BATCH 256   // sequences at most (omnishard infer --infer_batch_size)
void os_gen_fwd_step(os_gen_fwd *const *f, int64_t n, const int32_t *tok, float *z);
void os_gen_fwd_free(os_gen_fwd *f);
