#include "model/linear.h"
#include "kernels/ops.h"
#include "core/err.h"

void os_linear_fwd_t(float *out, os_tensor inp, os_tensor w, const float *bias, int64_t N, int64_t O) {
    os_k->matmul(os_matf(out, N, O, O), inp, os_tensor_t(w), 1.0f, 0.0f, os_vecf(bias, O), os_tensor_none());
}

void os_linear_fwd(float *out, const float *inp, os_tensor w, const float *bias, int64_t N, int64_t I, int64_t O) {
    os_linear_fwd_t(out, os_matf(inp, N, I, I), w, bias, N, O);
}

// beta 1: dinp += dout @ w; beta 0: dinp = dout @ w (its first writer: nothing zeroes it before)
static void linear_bwd_g(float beta, float *dinp, float *dw, float *dbias, os_tensor g, os_tensor inp, os_tensor w,
                         int64_t N, int64_t I, int64_t O) {
    OS_ASSERT(!dbias || g.dtype == OS_F32);   // the bias gradient sums fp32 dout
    if (dinp) os_k->matmul(os_matf(dinp, N, I, I), g, w, 1.0f, beta, os_tensor_none(), os_tensor_none());
    if (dw || dbias)   // dw += dout^T @ inp with dbias += its row sums (without dw: the sums alone, inp's shape only)
        os_k->matmul(os_matf(dw, O, I, I), os_tensor_t(g), inp, 1.0f, 1.0f, os_tensor_none(),
                     os_vecf(dbias, O));
}

static void linear_bwd(float beta, float *dinp, float *dw, float *dbias, const float *dout, os_tensor inp, os_tensor w,
                       int64_t N, int64_t I, int64_t O) {
    linear_bwd_g(beta, dinp, dw, dbias, os_matf(dout, N, O, O), inp, w, N, I, O);
}

void os_linear_bwd_v(float beta, float *dinp, float *dw, os_tensor dout, os_tensor inp, os_tensor w, int64_t I) {
    linear_bwd_g(beta, dinp, dw, NULL, dout, inp, w, dout.shape[0], I, dout.shape[1]);
}

void os_linear_bwd_t(float *dinp, float *dw, float *dbias, const float *dout, os_tensor inp, os_tensor w,
                     int64_t N, int64_t I, int64_t O) {
    linear_bwd(1.0f, dinp, dw, dbias, dout, inp, w, N, I, O);
}

void os_linear_bwd_set_t(float *dinp, float *dw, float *dbias, const float *dout, os_tensor inp, os_tensor w,
                         int64_t N, int64_t I, int64_t O) {
    linear_bwd(0.0f, dinp, dw, dbias, dout, inp, w, N, I, O);
}

void os_linear_bwd_set(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, os_tensor w,
                       int64_t N, int64_t I, int64_t O) {
    linear_bwd(0.0f, dinp, dw, dbias, dout, os_mat(inp, OS_F32, N, I, I), w, N, I, O);
}

void os_linear_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, os_tensor w,
                   int64_t N, int64_t I, int64_t O) {
    os_linear_bwd_t(dinp, dw, dbias, dout, os_mat(inp, OS_F32, N, I, I), w, N, I, O);
}
