// 1-D convolution, PyTorch cross-correlation, forward only (Whisper's front; CPU: kernels/conv1d.c).
// inp[Cin, Tin], w[Cout, Cin, K], b[Cout] (may be NULL) -> out[Cout, Tout], Tout = (Tin + 2*pad - K) / stride + 1,
// out[o,t] = b[o] + sum_{i,k} w[o,i,k] * inp[i, stride*t + k - pad] (zero outside).
// A direct tiled kernel: a block computes CONV_CO output channels x CONV_TT time steps, staging CONV_CI input
// channels of weights and of the input window in shared memory at a time. Tolerance against the CPU (im2col +
// sgemm): the same products summed in another order, |difference| within about 1e-6 * sum |w * x| (fp32).
// bf16 mixed precision (the backend opened in bf16: cu_conv1d_set_bf16), as the CPU's bf16 table
// (k_conv1d_fwd_prec with bf16 1): w and inp rounded to bf16 (round to nearest even) as they are staged, products
// and sums in fp32 (a product of two bf16 values is exact in fp32), so the two differ by the sums' order alone.
#include "cu_kern.cuh"
#include "cu_ops.h"
#include <stdio.h>
#include <stdlib.h>

enum { CONV_TT = 32, CONV_CO = 32, CONV_CI = 8, CONV_TY = 8 };   // block: CONV_TT x CONV_TY threads

__global__ void conv1d_fwd_kernel(float *out, const float *inp, const float *w, const float *b, int64_t Cin,
                                  int64_t Tin, int64_t Cout, int64_t K, int64_t stride, int64_t pad, int64_t Tout,
                                  int bf16) {
    CU_DYNAMIC_SHARED(float, sm);
    int64_t span = (CONV_TT - 1) * stride + K;              // input positions a block's CONV_TT outputs read
    float *ws = sm, *xs = sm + CONV_CO * CONV_CI * K;       // ws[CONV_CO][CONV_CI*K], xs[CONV_CI][span]
    int64_t t0 = (int64_t)blockIdx.x * CONV_TT, o0 = (int64_t)blockIdx.y * CONV_CO;
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * CONV_TT + tx, nt = CONV_TT * CONV_TY;
    float acc[CONV_CO / CONV_TY];
    for (int r = 0; r < CONV_CO / CONV_TY; r++) acc[r] = 0.0f;
    for (int64_t i0 = 0; i0 < Cin; i0 += CONV_CI) {
        for (int64_t e = tid; e < CONV_CO * CONV_CI * K; e += nt) {
            int64_t o = e / (CONV_CI * K), ik = e % (CONV_CI * K), i = i0 + ik / K;
            float x = o0 + o < Cout && i < Cin ? w[((o0 + o) * Cin + i) * K + ik % K] : 0.0f;
            ws[e] = bf16 ? cu_bf16_value(x) : x;
        }
        for (int64_t e = tid; e < CONV_CI * span; e += nt) {
            int64_t i = i0 + e / span, s = t0 * stride - pad + e % span;
            float x = i < Cin && s >= 0 && s < Tin ? inp[i * Tin + s] : 0.0f;
            xs[e] = bf16 ? cu_bf16_value(x) : x;
        }
        __syncthreads();
        for (int64_t ik = 0; ik < CONV_CI * K; ik++) {
            float x = xs[(ik / K) * span + tx * stride + ik % K];
            for (int r = 0; r < CONV_CO / CONV_TY; r++) acc[r] += ws[(ty + r * CONV_TY) * CONV_CI * K + ik] * x;
        }
        __syncthreads();
    }
    int64_t t = t0 + tx;
    if (t >= Tout) return;
    for (int r = 0; r < CONV_CO / CONV_TY; r++) {
        int64_t o = o0 + ty + r * CONV_TY;
        if (o < Cout) out[o * Tout + t] = (b ? b[o] : 0.0f) + acc[r];
    }
}

static int g_bf16;   // the backend's precision (os_cuda_open: cu_conv1d_set_bf16)
void cu_conv1d_set_bf16(int bf16) { g_bf16 = bf16; }

void cu_conv1d_fwd(float *out, const float *inp, const float *w, const float *b, int64_t Cin, int64_t Tin,
                   int64_t Cout, int64_t K, int64_t stride, int64_t pad) {
    if (stride <= 0 || Cout <= 0 || Tin + 2 * pad < K) return;
    int64_t Tout = (Tin + 2 * pad - K) / stride + 1;
    int64_t bytes = (int64_t)sizeof(float) * (CONV_CO * CONV_CI * K + CONV_CI * ((CONV_TT - 1) * stride + K));
    if (bytes > 48 * 1024) {   // kernels of Whisper's size (K = 3, stride <= 2) take under 2 KB
        fprintf(stderr, "CUDA backend: conv1d: kernel size %lld with stride %lld needs %lld bytes of shared memory, "
                "above the 48 KB this kernel uses\n", (long long)K, (long long)stride, (long long)bytes);
        exit(1);
    }
    dim3 grid(cu_blocks(Tout, CONV_TT), cu_blocks(Cout, CONV_CO)), block(CONV_TT, CONV_TY);
    conv1d_fwd_kernel<<<grid, block, (size_t)bytes, cu_stream()>>>(out, inp, w, b, Cin, Tin, Cout, K, stride, pad,
                                                                   Tout, g_bf16);
    CU_LAUNCHED("conv1d_fwd_kernel");
}
