// The small kernels of the CUDA backend's products (cu_gemm_kernels.h): bf16 rounding and widening, bias rows and
// sums.
#include "cuda/cu_gemm_kernels.h"
#include "cuda/cu_kern.cuh"

enum { THREADS = 256 };

// grid-stride over the rows x cols elements of a strided matrix
__global__ static void round_rows_kernel(uint16_t *dst, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = cu_bf16_bits(src[(i / cols) * ld + i % cols]);
}

__global__ static void fill_kernel(float *out, const float *bias, int64_t N, int64_t O) {
    int64_t n = N * O;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = bias[i % O];
}

// one thread per output, k in order (the CPU's order of the double sum)
__global__ static void bias_grad_kernel(float *dbias, const void *a, int bf16, int64_t M, int64_t K, int64_t sm,
                                        int64_t sk) {
    int64_t m = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (m >= M) return;
    const float *af = (const float *)a;
    const uint16_t *ah = (const uint16_t *)a;
    double s = 0.0;
    for (int64_t k = 0; k < K; k++) {
        int64_t i = m * sm + k * sk;
        s += bf16 ? __uint_as_float((uint32_t)ah[i] << 16) : af[i];
    }
    dbias[m] += (float)s;
}

__global__ static void widen_rows_kernel(float *dst, const uint16_t *src, int64_t rows, int64_t cols, int64_t ld) {
    int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = __uint_as_float((uint32_t)src[(i / cols) * ld + i % cols] << 16);
}

__global__ static void scale_kernel(float *c, int64_t M, int64_t N, int64_t ldc, float beta) {
    int64_t n = M * N;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float *x = &c[(i / N) * ldc + i % N];
        *x = beta == 0.0f ? 0.0f : beta * *x;
    }
}

// a grid-stride launch over n items: at most 65536 blocks
static unsigned grid(int64_t n) {
    unsigned b = cu_blocks(n, THREADS);
    return b > 65536u ? 65536u : b;
}

extern "C" void cu_round_rows(uint16_t *dst, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    round_rows_kernel<<<grid(rows * cols), THREADS, 0, cu_stream()>>>(dst, src, rows, cols, ld);
    CU_LAUNCHED("cu_round_rows");
}

extern "C" void cu_fill_rows(float *out, const float *bias, int64_t N, int64_t O) {
    fill_kernel<<<grid(N * O), THREADS, 0, cu_stream()>>>(out, bias, N, O);
    CU_LAUNCHED("cu_fill_rows");
}

extern "C" void cu_bias_grad(float *dbias, const void *a, int bf16, int64_t M, int64_t K, int64_t sm, int64_t sk) {
    bias_grad_kernel<<<cu_blocks(M, THREADS), THREADS, 0, cu_stream()>>>(dbias, a, bf16, M, K, sm, sk);
    CU_LAUNCHED("cu_bias_grad");
}

extern "C" void cu_widen_rows(float *dst, const uint16_t *src, int64_t rows, int64_t cols, int64_t ld) {
    widen_rows_kernel<<<grid(rows * cols), THREADS, 0, cu_stream()>>>(dst, src, rows, cols, ld);
    CU_LAUNCHED("cu_widen_rows");
}

extern "C" void cu_scale_rows(float *c, int64_t M, int64_t N, int64_t ldc, float beta) {
    scale_kernel<<<grid(M * N), THREADS, 0, cu_stream()>>>(c, M, N, ldc, beta);
    CU_LAUNCHED("cu_scale_rows");
}
