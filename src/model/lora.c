#include "model/lora.h"
#include "core/rng.h"
#include "kernels/ops.h"
#include <string.h>

// xd[N,I] = x * keep / (1 - p), keep = uniform(key, n*I + i) >= p
static void dropout(const os_lora_op *op, const float *x, float *xd) {
    int64_t n = op->N * op->I;
    float sc = 1.0f / (1.0f - op->p);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) xd[i] = os_rng_uniform(op->key, (uint64_t)i) >= op->p ? x[i] * sc : 0.0f;
}

void os_lora_fwd(const os_lora_op *op, const float *x, const float *A, const float *B, float *u, float *y) {
    if (op->p > 0) dropout(op, x, op->xd), x = op->xd;
    os_k->linear_fwd(u, x, A, NULL, op->N, op->I, op->r);
    os_k->scale(u, op->s, op->N * op->r);
    if (y) os_k->gemm(0, 1, op->N, op->O, op->r, 1.0f, u, op->r, B, op->r, 1.0f, y, op->O);
}

void os_lora_bwd(const os_lora_op *op, const float *x, const float *A, const float *B, const float *u, const float *dy,
                 float *du, float *dA, float *dB, float *dx) {
    os_k->zero(du, op->N * op->r);
    os_k->linear_bwd(du, dB, NULL, dy, u, B, op->N, op->r, op->O);
    os_k->scale(du, op->s, op->N * op->r);
    if (op->p <= 0) {
        os_k->linear_bwd(dx, dA, NULL, du, x, A, op->N, op->I, op->r);
        return;
    }
    dropout(op, x, op->xd);   // dA from the dropped input, then dx through the same mask
    os_k->linear_bwd(NULL, dA, NULL, du, op->xd, A, op->N, op->I, op->r);
    os_k->zero(op->xd, op->N * op->I);
    os_k->linear_bwd(op->xd, NULL, NULL, du, NULL, A, op->N, op->I, op->r);
    int64_t n = op->N * op->I;
    float sc = 1.0f / (1.0f - op->p);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        if (os_rng_uniform(op->key, (uint64_t)i) >= op->p) dx[i] += op->xd[i] * sc;
}
