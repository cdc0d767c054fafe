// A linear layer's products (PyTorch's layout: w[O, I]) as calls of the seam's matmul (kernels/ops.h) on tensor
// views (core/tensor.h): the decoder layer, LoRA, the projector and the Whisper encoder compute through these.
#pragma once
#include <stdint.h>

// out[N,O] = inp[N,I] @ w[O,I]^T + bias[O] (bias may be NULL)
void os_linear_fwd(float *out, const float *inp, const float *w, const float *bias, int64_t N, int64_t I, int64_t O);
// dinp[N,I] += dout[N,O] @ w[O,I];  dw[O,I] += dout^T @ inp;  dbias[O] += column sums of dout (in double). A NULL
// gradient is not computed (and what only it reads may be NULL: inp without dw, w without dinp).
void os_linear_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                   int64_t N, int64_t I, int64_t O);
