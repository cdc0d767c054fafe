// nb batches of inp[R, C] transposed into out[nb, C, R], not in place (CPU: kernels/reshape.c): the Whisper front's
// [d, T] -> [T, d], the projector's convolution windows [k, d] -> [d, k]. One thread per output element (writes
// coalesced); equal to the CPU bit for bit.
#include "cu_kern.cuh"
#include "cu_ops.h"

__global__ void transpose_kernel(float *out, const float *inp, int64_t total, int64_t R, int64_t C) {
    int64_t per = R * C;
    CU_FOR(i, total) {
        int64_t b = i / per, c = i % per / R, r = i % R;   // out[b, c, r]
        out[i] = inp[b * per + r * C + c];
    }
}

void cu_transpose(float *out, const float *inp, int64_t nb, int64_t R, int64_t C) {
    int64_t total = nb * R * C;
    if (total <= 0) return;
    transpose_kernel<<<cu_grid(total), CU_THREADS, 0, cu_stream()>>>(out, inp, total, R, C);
    CU_LAUNCHED("transpose_kernel");
}
