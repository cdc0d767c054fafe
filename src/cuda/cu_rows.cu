// Row gathers and scatter-adds over an index list, and a row broadcast over rows, on the device (CPU:
// kernels/rows.c): all equal the CPU bit for bit. The gather is a copy; the scatter-add and the row sum give each
// column to one thread, which adds the rows in increasing i (no atomics: the CPU's order of each element's sum,
// whatever the rows' repeats).
#include "cu_kern.cuh"
#include "cu_ops.h"

__global__ void gather_rows_kernel(float *out, const float *src, const int32_t *idx, int64_t n, int64_t C) {
    CU_FOR(k, n * C) {
        int64_t i = k / C, c = k % C;
        if (idx[i] >= 0) out[k] = src[(int64_t)idx[i] * C + c];
    }
}

void cu_gather_rows(float *out, const float *src, const int32_t *idx, int64_t n, int64_t C) {
    if (n <= 0 || C <= 0) return;
    gather_rows_kernel<<<cu_grid(n * C), CU_THREADS, 0, cu_stream()>>>(out, src, idx, n, C);
    CU_LAUNCHED("gather_rows_kernel");
}

// thread c: dst[idx[i], c] += src[i, c] for i = 0, 1, ... (rows with idx < 0 skipped)
__global__ void scatter_add_rows_kernel(float *dst, const float *src, const int32_t *idx, int64_t n, int64_t C) {
    CU_FOR(c, C) {
        for (int64_t i = 0; i < n; i++) {
            int32_t r = idx[i];
            if (r >= 0) dst[(int64_t)r * C + c] = __fadd_rn(dst[(int64_t)r * C + c], src[i * C + c]);
        }
    }
}

void cu_scatter_add_rows(float *dst, const float *src, const int32_t *idx, int64_t n, int64_t C) {
    if (n <= 0 || C <= 0) return;
    scatter_add_rows_kernel<<<cu_grid(C), CU_THREADS, 0, cu_stream()>>>(dst, src, idx, n, C);
    CU_LAUNCHED("scatter_add_rows_kernel");
}

__global__ void add_row_bias_kernel(float *x, const float *b, int64_t n, int64_t C) {
    CU_FOR(k, n * C) x[k] = __fadd_rn(x[k], b[k % C]);
}

void cu_add_row_bias(float *x, const float *b, int64_t n, int64_t C) {
    if (n <= 0 || C <= 0) return;
    add_row_bias_kernel<<<cu_grid(n * C), CU_THREADS, 0, cu_stream()>>>(x, b, n, C);
    CU_LAUNCHED("add_row_bias_kernel");
}

// thread c: out[c] += x[i, c] for i = 0, 1, ... (the CPU's order)
__global__ void sum_rows_kernel(float *out, const float *x, int64_t n, int64_t C) {
    CU_FOR(c, C) {
        float s = out[c];
        for (int64_t i = 0; i < n; i++) s = __fadd_rn(s, x[i * C + c]);
        out[c] = s;
    }
}

void cu_sum_rows(float *out, const float *x, int64_t n, int64_t C) {
    if (n <= 0 || C <= 0) return;
    sum_rows_kernel<<<cu_grid(C), CU_THREADS, 0, cu_stream()>>>(out, x, n, C);
    CU_LAUNCHED("sum_rows_kernel");
}
