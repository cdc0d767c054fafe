// Linear layers (row-major, weights w[O,I] as in PyTorch) as products of k_matmul (matmul.c), fp32: the CPU's
// functions of kernels.h (the seam's callers use matmul itself, model/linear.c)
#include "kernels/kernels.h"

// out[N,O] = inp[N,I] @ w[O,I]^T + bias[O]
void k_linear_fwd(float *out, const float *inp, const float *w, const float *bias, int64_t N, int64_t I, int64_t O) {
    k_matmul(os_matf(out, N, O, O), os_matf(inp, N, I, I), os_tensor_t(os_matf(w, O, I, I)), 1.0f, 0.0f,
             os_vecf(bias, O), os_tensor_none());
}

// dinp[N,I] += dout[N,O] @ w[O,I];  dw[O,I] += dout^T @ inp;  dbias[O] += column sums of dout (in double). What only
// a NULL gradient reads may be NULL (inp without dw, w without dinp).
void k_linear_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                  int64_t N, int64_t I, int64_t O) {
    os_tensor g = os_matf(dout, N, O, O);
    if (dinp) k_matmul(os_matf(dinp, N, I, I), g, os_matf(w, O, I, I), 1.0f, 1.0f, os_tensor_none(), os_tensor_none());
    if (dw || dbias)   // dw with its bias gradient (the sums alone without dw: only inp's shape is read)
        k_matmul(os_matf(dw, O, I, I), os_tensor_t(g), os_mat(inp, OS_F32, N, I, I), 1.0f, 1.0f, os_tensor_none(),
                 os_vecf(dbias, O));
}
