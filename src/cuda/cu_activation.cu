// Elementwise activations on x[N] (CPU: kernels/activation.c): SwiGLU forward/backward (backward accumulates, or
// overwrites with acc 0; dgate or dup may be NULL), exact-erf GELU and ReLU forward (in place allowed), ReLU's gradient from its output.
// Tolerance against the CPU: relu and relu_grad equal; swiglu and gelu differ by libdevice's expf/erff against the CPU's k_expf
// and glibc erff (each within 2 ulp): relative difference up to about 5e-7 per element (a few ulp).
#include "cu_kern.cuh"
#include "cu_ops.h"

__global__ void swiglu_fwd_kernel(float *out, const float *gate, const float *up, int64_t n) {
    CU_FOR(i, n) out[i] = __fmul_rn(__fdiv_rn(gate[i], __fadd_rn(1.0f, expf(-gate[i]))), up[i]);
}

void cu_swiglu_fwd(float *out, const float *gate, const float *up, int64_t N) {
    if (N <= 0) return;
    swiglu_fwd_kernel<<<cu_grid(N), CU_THREADS, 0, cu_stream()>>>(out, gate, up, N);
    CU_LAUNCHED("swiglu_fwd_kernel");
}

// d silu(g) / dg = s * (1 + g * (1 - s)), s = sigmoid(g)
// (acc 0: the terms added to 0, dgate and dup not read)
__global__ void swiglu_bwd_kernel(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                                  int64_t n, int acc) {
    CU_FOR(i, n) {
        float g = gate[i], s = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-g)));
        if (dgate) {
            float ds = __fadd_rn(1.0f, __fmul_rn(g, __fsub_rn(1.0f, s)));
            dgate[i] = __fadd_rn(acc ? dgate[i] : 0.0f, __fmul_rn(__fmul_rn(__fmul_rn(dout[i], up[i]), s), ds));
        }
        if (dup) dup[i] = __fadd_rn(acc ? dup[i] : 0.0f, __fmul_rn(__fmul_rn(dout[i], g), s));
    }
}

void cu_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t N,
                   int acc) {
    if (N <= 0 || (!dgate && !dup)) return;
    swiglu_bwd_kernel<<<cu_grid(N), CU_THREADS, 0, cu_stream()>>>(dgate, dup, dout, gate, up, N, acc);
    CU_LAUNCHED("swiglu_bwd_kernel");
}

__global__ void gelu_fwd_kernel(float *out, const float *inp, int64_t n) {
    const float r2 = (float)0.70710678118654752440;   // (float)M_SQRT1_2
    CU_FOR(i, n) {
        float x = inp[i];
        out[i] = __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, erff(__fmul_rn(x, r2))));
    }
}

void cu_gelu_fwd(float *out, const float *inp, int64_t N) {
    if (N <= 0) return;
    gelu_fwd_kernel<<<cu_grid(N), CU_THREADS, 0, cu_stream()>>>(out, inp, N);
    CU_LAUNCHED("gelu_fwd_kernel");
}

__global__ void relu_fwd_kernel(float *out, const float *inp, int64_t n) {
    CU_FOR(i, n) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void cu_relu_fwd(float *out, const float *inp, int64_t N) {
    if (N <= 0) return;
    relu_fwd_kernel<<<cu_grid(N), CU_THREADS, 0, cu_stream()>>>(out, inp, N);
    CU_LAUNCHED("relu_fwd_kernel");
}

__global__ void relu_grad_kernel(float *dy, const float *y, int64_t n) {
    CU_FOR(i, n) if (!(y[i] > 0.0f)) dy[i] = 0.0f;
}

void cu_relu_grad(float *dy, const float *y, int64_t N) {
    if (N <= 0) return;
    relu_grad_kernel<<<cu_grid(N), CU_THREADS, 0, cu_stream()>>>(dy, y, N);
    CU_LAUNCHED("relu_grad_kernel");
}
