// Linear layers (row-major, weights w[O,I] as in PyTorch) as products of k_matmul (matmul.c).
#include "kernels/kernels.h"

// out[N,O] = inp[N,I] @ w[O,I]^T + bias[O]
void k_linear_fwd_prec(int bf16, float *out, const float *inp, const float *w, const float *bias, int64_t N, int64_t I, int64_t O) {
    k_matmul_prec(bf16, os_matf(out, N, O, O), os_matf(inp, N, I, I), os_tensor_t(os_matf(w, O, I, I)), 1.0f, 0.0f,
             os_vecf(bias, O), os_tensor_none());
}

// dinp[N,I] += dout[N,O] @ w[O,I];  dw[O,I] += dout^T @ inp;  dbias[O] += column sums of dout (in double). What only
// a NULL gradient reads may be NULL (inp without dw, w without dinp).
void k_linear_bwd_prec(int bf16, float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                  int64_t N, int64_t I, int64_t O) {
    os_tensor g = os_matf(dout, N, O, O);
    if (dinp) k_matmul_prec(bf16, os_matf(dinp, N, I, I), g, os_matf(w, O, I, I), 1.0f, 1.0f, os_tensor_none(), os_tensor_none());
    if (dw || dbias)   // dw with its bias gradient (the sums alone without dw: only inp's shape is read)
        k_matmul_prec(bf16, os_matf(dw, O, I, I), os_tensor_t(g), os_mat(inp, OS_F32, N, I, I), 1.0f, 1.0f, os_tensor_none(),
                 os_vecf(dbias, O));
}

void k_linear_fwd(float *out, const float *inp, const float *w, const float *bias, int64_t N, int64_t I, int64_t O) {
    k_linear_fwd_prec(0, out, inp, w, bias, N, I, O);
}
void k_linear_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                  int64_t N, int64_t I, int64_t O) {
    k_linear_bwd_prec(0, dinp, dw, dbias, dout, inp, w, N, I, O);
}
