// Buffers and elementwise helpers on flat arrays x[N] (CPU: kernels/elementwise.c, ops_cpu.c).
// add, axpy and scale round each operation as the CPU does (no contraction into fma: __fmul_rn/__fadd_rn),
// so they equal the CPU kernels bit for bit; first_nonfinite is a minimum (exact in any order): equal. sumsq sums in double in a fixed tree (CU_SUM_BLOCKS blocks, then one):
// the same bits on every run; against the CPU's OpenMP sum, relative difference about 1e-15.
#include "cu_kern.cuh"
#include "cu_ops.h"

enum { CU_SUM_BLOCKS = 256 };   // blocks of the first stage of sumsq (fixed: the order of the sum depends on it only)
static __device__ double sumsq_part[CU_SUM_BLOCKS];   // per-block partial sums (calls are ordered on cu_stream())
static __device__ int64_t nonfinite_part[CU_SUM_BLOCKS];   // per-block first non-finite index (n: none)

void cu_zero(float *x, int64_t n) {
    if (n > 0) CU_CHECK(cudaMemsetAsync(x, 0, sizeof(float) * (size_t)n, cu_stream()));
}

void cu_copy(float *dst, const float *src, int64_t n) {
    if (n > 0 && dst != src)
        CU_CHECK(cudaMemcpyAsync(dst, src, sizeof(float) * (size_t)n, cudaMemcpyDeviceToDevice, cu_stream()));
}

__global__ void add_kernel(float *out, const float *a, const float *b, int64_t n) {
    CU_FOR(i, n) out[i] = __fadd_rn(a[i], b[i]);
}

void cu_add(float *out, const float *a, const float *b, int64_t N) {
    if (N <= 0) return;
    add_kernel<<<cu_grid(N), CU_THREADS, 0, cu_stream()>>>(out, a, b, N);
    CU_LAUNCHED("add_kernel");
}

__global__ void axpy_kernel(float *y, float a, const float *x, int64_t n) {
    CU_FOR(i, n) y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}

void cu_axpy(float *y, float a, const float *x, int64_t N) {
    if (N <= 0) return;
    axpy_kernel<<<cu_grid(N), CU_THREADS, 0, cu_stream()>>>(y, a, x, N);
    CU_LAUNCHED("axpy_kernel");
}

__global__ void scale_kernel(float *x, float a, int64_t n) {
    CU_FOR(i, n) x[i] = __fmul_rn(x[i], a);
}

void cu_scale(float *x, float a, int64_t N) {
    if (N <= 0) return;
    scale_kernel<<<cu_grid(N), CU_THREADS, 0, cu_stream()>>>(x, a, N);
    CU_LAUNCHED("scale_kernel");
}

// stage 1: block j sums x[i]^2 over i = j*CU_THREADS + tid + k*CU_SUM_BLOCKS*CU_THREADS into sumsq_part[j]
__global__ void sumsq_part_kernel(const float *x, int64_t n) {
    double s = 0.0;
    CU_FOR(i, n) s += (double)x[i] * x[i];
    s = cu_block_sum(s);
    if (threadIdx.x == 0) sumsq_part[blockIdx.x] = s;
}

// stage 2 (one block of CU_SUM_BLOCKS threads): *out = the partials' sum
__global__ void sumsq_total_kernel(double *out) {
    double s = cu_block_sum(sumsq_part[threadIdx.x]);
    if (threadIdx.x == 0) *out = s;
}

void cu_sumsq(const float *x, int64_t N, double *out) {
    sumsq_part_kernel<<<CU_SUM_BLOCKS, CU_THREADS, 0, cu_stream()>>>(x, N > 0 ? N : 0);
    CU_LAUNCHED("sumsq_part_kernel");
    sumsq_total_kernel<<<1, CU_SUM_BLOCKS, 0, cu_stream()>>>(out);
    CU_LAUNCHED("sumsq_total_kernel");
}

// stage 1: block j's first index i (of those sumsq's stage 1 gives it) where x[i] is NaN or infinite, n if none
__global__ void nonfinite_part_kernel(const float *x, int64_t n) {
    int64_t first = n;
    CU_FOR(i, n) if (!isfinite(x[i]) && i < first) first = i;
    first = cu_block_min(first);
    if (threadIdx.x == 0) nonfinite_part[blockIdx.x] = first;
}

// stage 2 (one block of CU_SUM_BLOCKS threads): *out = the smallest, -1 for none
__global__ void nonfinite_total_kernel(int64_t n, int64_t *out) {
    int64_t first = cu_block_min(nonfinite_part[threadIdx.x]);
    if (threadIdx.x == 0) *out = first < n ? first : -1;
}

void cu_first_nonfinite(const float *x, int64_t N, int64_t *out) {
    int64_t n = N > 0 ? N : 0;
    nonfinite_part_kernel<<<CU_SUM_BLOCKS, CU_THREADS, 0, cu_stream()>>>(x, n);
    CU_LAUNCHED("nonfinite_part_kernel");
    nonfinite_total_kernel<<<1, CU_SUM_BLOCKS, 0, cu_stream()>>>(n, out);
    CU_LAUNCHED("nonfinite_total_kernel");
}
