// The speech projectors of SLAM-Omni (SLAM-LLM src/slam_llm/models/projector.py), trained; the encoder is frozen,
// so no gradient flows to the encoder frames x[T_enc, d]. T_s = T_enc / k (the T_enc % k last frames are dropped).
//   "linear" (EncoderProjectorConcat): groups of k consecutive frames xc[T_s, k*d] (x itself read with row stride
//     k*d) -> a = relu(xc @ w1^T + b1) [T_s, hidden] -> out = a @ w2^T + b2 [T_s, C].
//     Parameters encoder_projector.linear1.{weight [hidden, k*d], bias}, linear2.{weight [C, hidden], bias [C]}.
//   "cov1d-linear" (EncoderProjectorCov1d): c = relu(conv1d(x)) [T_s, d] (Conv1d(d, d, kernel k, stride k, no
//     padding)) -> a = relu(c @ w1^T + b1) [T_s, hidden] -> out = a @ w2^T + b2. The convolution is a linear map of
//     xt[T_s, d*k], xt[t, i*k + j] = x[t*k + j, i], with the conv weight [d_out, d_in, k] read as [d, d*k].
//     Parameters encoder_projector.conv1d.{weight [d, d, k], bias [d]}, linear1.{weight [hidden, d], bias},
//     linear2.{weight [C, hidden], bias [C]}.
#pragma once
#include "core/tensor.h"
#include <stdint.h>

typedef enum { OS_PROJ_LINEAR, OS_PROJ_COV1D } os_proj_kind;

typedef struct {
    int64_t k, d, hidden, C;
    os_proj_kind kind;
} os_proj_dims;

// the matrices as views [rows, cols] (fp32, or bf16 under bf16 mixed precision: os_weights.tensor; the conv weight
// [d, d, k] read as [d, d*k]), the biases fp32
typedef struct {
    os_tensor w1;
    const float *b1;
    os_tensor w2;
    const float *b2;
    os_tensor cw;                               // cw, cb: the convolution (cov1d-linear only)
    const float *cb;
} os_proj_w;

typedef struct {
    float *w1, *b1, *w2, *b2, *cw, *cb;         // accumulated (+=); any may be NULL
} os_proj_g;

// "linear" / "cov1d-linear" (the reference's encoder_projector names); -1 for anything else
int os_proj_kind_parse(const char *name);
const char *os_proj_kind_name(os_proj_kind k);
// floats per LLM position: activations kept from the forward for the backward / backward scratch
int64_t os_projector_act_floats(const os_proj_dims *p);
int64_t os_projector_scratch_floats(const os_proj_dims *p);

// act[T_s * os_projector_act_floats], out[T_s, C]
void os_projector_fwd(const os_proj_dims *p, const os_proj_w *w, const float *x, int64_t T_s, float *act, float *out);
// Gradients of the parameters from dout[T_s, C]; scratch[T_s * os_projector_scratch_floats].
void os_projector_bwd(const os_proj_dims *p, const os_proj_w *w, const float *x, const float *act, const float *dout,
                      int64_t T_s, float *scratch, const os_proj_g *g);
