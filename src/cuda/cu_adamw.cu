// AdamW with PyTorch's semantics over a flat bucket of n elements, one fused kernel (CPU: kernels/adamw.c).
// The bias corrections are computed on the host in double as the CPU does, and each element's operations are the
// CPU's in the same order and rounding (__fmul_rn & co.: no fma contraction; IEEE sqrt and division): the result
// equals k_adamw bit for bit.
#include "cu_kern.cuh"
#include "cu_ops.h"
#include <math.h>

__global__ void adamw_kernel(float *p, float *g, float *m, float *v, int64_t n, float lr, float b1, float b2,
                             float eps, float wd, float gscale, float step_size, float bc2_sqrt) {
    float decay = __fsub_rn(1.0f, __fmul_rn(lr, wd)), c1 = __fsub_rn(1.0f, b1), c2 = __fsub_rn(1.0f, b2);
    CU_FOR(i, n) {
        float gi = __fmul_rn(g[i], gscale);
        g[i] = 0.0f;
        float pi = __fmul_rn(p[i], decay);
        float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(c1, gi));
        float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(c2, gi), gi));
        m[i] = mi;
        v[i] = vi;
        float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        p[i] = __fsub_rn(pi, __fdiv_rn(__fmul_rn(step_size, mi), den));
    }
}

void cu_adamw(float *p, float *g, float *m, float *v, int64_t n, float lr, float b1, float b2, float eps, float wd,
              float gscale, int64_t step) {
    if (n <= 0) return;
    double bc1 = 1.0 - pow((double)b1, (double)step), bc2 = 1.0 - pow((double)b2, (double)step);
    float step_size = (float)((double)lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    adamw_kernel<<<cu_grid(n), CU_THREADS, 0, cu_stream()>>>(p, g, m, v, n, lr, b1, b2, eps, wd, gscale, step_size,
                                                             bc2_sqrt);
    CU_LAUNCHED("adamw_kernel");
}
