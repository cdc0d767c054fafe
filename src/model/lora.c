#include "model/lora.h"
#include "kernels/ops.h"
#include "model/linear.h"
#include "core/err.h"
#include <stddef.h>

void os_lora_fwd(const os_lora_op *op, os_tensor x, os_tensor A, os_tensor B, os_tensor u, float *y) {
    OS_ASSERT(op->p <= 0 || x.dtype == OS_F32);   // dropout reads fp32 (model/layer.h: such an input is not stored bf16)
    if (op->p > 0) os_k->dropout(op->xd, x.data, op->N * op->I, op->p, op->key, 0), x = os_matf(op->xd, op->N, op->I, op->I);
    float *uf = u.dtype == OS_BF16 ? op->uf : u.data;
    os_linear_fwd_t(uf, x, A, NULL, op->N, op->r);
    os_k->scale(uf, op->s, op->N * op->r);
    if (u.dtype == OS_BF16) os_k->cast(u, os_matf(uf, op->N, op->r, op->r));
    if (y)   // y[N, O] += u[N, r] @ B[O, r]^T
        os_k->matmul(os_matf(y, op->N, op->O, op->O), u, os_tensor_t(B), 1.0f, 1.0f, os_tensor_none(), os_tensor_none());
}

void os_lora_bwd(const os_lora_op *op, os_tensor x, os_tensor A, os_tensor B, os_tensor u, os_tensor dy,
                 float *du, float *dA, float *dB, float *dx) {
    OS_ASSERT(op->p <= 0 || x.dtype == OS_F32);
    os_k->zero(du, op->N * op->r);
    os_linear_bwd_v(1.0f, du, dB, dy, u, B, op->r);
    os_k->scale(du, op->s, op->N * op->r);
    if (op->p <= 0) {
        os_linear_bwd_t(dx, dA, NULL, du, x, A, op->N, op->I, op->r);
        return;
    }
    os_k->dropout(op->xd, x.data, op->N * op->I, op->p, op->key, 0);   // dA from the dropped input, then dx through the same mask
    os_linear_bwd(NULL, dA, NULL, du, op->xd, A, op->N, op->I, op->r);
    os_k->zero(op->xd, op->N * op->I);
    os_linear_bwd(op->xd, NULL, NULL, du, NULL, A, op->N, op->I, op->r);
    os_k->dropout(dx, op->xd, op->N * op->I, op->p, op->key, 1);
}
