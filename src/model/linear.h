// A linear layer's products (PyTorch's layout: w[O, I]) as calls of the seam's matmul (kernels/ops.h) on tensor
// views (core/tensor.h): the decoder layer, LoRA, the projector and the Whisper encoder compute through these. The
// weight is a view [O, I] (os_weights.tensor: fp32, or the bf16 copy its owner keeps under bf16 mixed precision);
// activations and gradients are fp32, but for an input given as a view (the _t forms: fp32, or an activation
// stored bf16, model/layer.h).
#pragma once
#include "core/tensor.h"
#include <stdint.h>

// out[N,O] = inp[N,I] @ w[O,I]^T + bias[O] (bias may be NULL)
void os_linear_fwd(float *out, const float *inp, os_tensor w, const float *bias, int64_t N, int64_t I, int64_t O);
void os_linear_fwd_t(float *out, os_tensor inp, os_tensor w, const float *bias, int64_t N, int64_t O);
// dinp[N,I] += dout[N,O] @ w[O,I];  dw[O,I] += dout^T @ inp;  dbias[O] += column sums of dout (in double). A NULL
// gradient is not computed (and what only it reads may be NULL or os_tensor_none(): inp without dw, w without dinp).
void os_linear_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, os_tensor w,
                   int64_t N, int64_t I, int64_t O);
void os_linear_bwd_t(float *dinp, float *dw, float *dbias, const float *dout, os_tensor inp, os_tensor w,
                     int64_t N, int64_t I, int64_t O);
// the same with dinp[N,I] = dout @ w, overwritten (the gradient's first writer, which needs no zeroed dinp: bitwise
// what zeroing it and accumulating gives, as the product's sums start from +0 either way)
void os_linear_bwd_set(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, os_tensor w,
                       int64_t N, int64_t I, int64_t O);
void os_linear_bwd_set_t(float *dinp, float *dw, float *dbias, const float *dout, os_tensor inp, os_tensor w,
                         int64_t N, int64_t I, int64_t O);
// dout [N, O] a view too (fp32, or a gradient stored bf16: model/layer.c's dgate/dup), no bias gradient; beta 1:
// dinp += dout @ w, beta 0: dinp = dout @ w
void os_linear_bwd_v(float beta, float *dinp, float *dw, os_tensor dout, os_tensor inp, os_tensor w, int64_t I);
