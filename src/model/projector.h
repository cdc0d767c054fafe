// The speech projector of SLAM-Omni (SLAM-LLM's EncoderProjectorConcat), trained:
//   encoder frames x[T_enc, d] -> groups of k consecutive frames xc[T_s, k*d], T_s = T_enc / k (the T_enc % k
//   last frames are dropped; xc is x itself read with row stride k*d) -> a = relu(xc @ w1^T + b1) [T_s, hidden]
//   -> out = a @ w2^T + b2 [T_s, C].
// Parameters: encoder_projector.linear1.{weight [hidden, k*d], bias [hidden]}, linear2.{weight [C, hidden], bias [C]}.
#pragma once
#include <stdint.h>

typedef struct {
    int64_t k, d, hidden, C;
} os_proj_dims;

// a[T_s, hidden] (post-ReLU activations, kept for the backward), out[T_s, C]
void os_projector_fwd(const os_proj_dims *p, const float *w1, const float *b1, const float *w2, const float *b2,
                      const float *x, int64_t T_s, float *a, float *out);
// Accumulates dw1, db1, dw2, db2 (+=) from dout[T_s, C]; da[T_s, hidden] is scratch. The encoder is frozen, so no
// gradient flows to x. Any gradient pointer may be NULL.
void os_projector_bwd(const os_proj_dims *p, const float *w2, const float *x, const float *a, const float *dout,
                      int64_t T_s, float *da, float *dw1, float *db1, float *dw2, float *db2);
