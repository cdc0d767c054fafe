// Embedding lookup over an input's R id rows, out[B*L, C] = sum over r of scale * table[ids[b, r, l], :], and its
// backward, a scatter-add grouped by table row (CPU: kernels/embedding.c; shapes at their lines in
// kernels/ops_list.h). Every element is rounded as on the CPU (the rows added in the same order, no contraction):
// both equal the CPU bit for bit. Backward without atomics: block (k, y) owns columns [y * CU_THREADS, ..) of the
// distinct table row ids[k] (a frequent id's columns spread over blocks) and its threads (one column each) add
// that row's dout rows in the list's order.
#include "cu_kern.cuh"
#include "cu_ops.h"

__global__ void embedding_fwd_kernel(float *out, const int32_t *ids, const float *table, int64_t B, int64_t R,
                                     int64_t L, int64_t C, float scale) {
    CU_FOR(i, B * L * C) {
        int64_t n = i / C, c = i % C;
        const int32_t *id = ids + (n / L) * R * L + n % L;
        float acc = 0.0f;
        for (int64_t r = 0; r < R; r++) acc = __fadd_rn(acc, __fmul_rn(scale, table[(int64_t)id[r * L] * C + c]));
        out[i] = acc;
    }
}

void cu_embedding_fwd(float *out, const int32_t *ids, const float *table, int64_t B, int64_t R, int64_t L, int64_t C,
                      float scale) {
    if (B <= 0 || L <= 0 || C <= 0) return;
    embedding_fwd_kernel<<<cu_grid(B * L * C), CU_THREADS, 0, cu_stream()>>>(out, ids, table, B, R, L, C, scale);
    CU_LAUNCHED("embedding_fwd_kernel");
}

// block (k, y), thread x: column c = y * CU_THREADS + x of dtable[ids[k], :] += scale * dout[rows[j], :] for
// j = start[k], ..
__global__ void embedding_bwd_kernel(float *dtable, const int32_t *ids, const int32_t *start, const int32_t *rows,
                                     const float *dout, int64_t C, float scale) {
    int64_t k = blockIdx.x, c = (int64_t)blockIdx.y * CU_THREADS + threadIdx.x;
    float *d = dtable + (int64_t)ids[k] * C;
    if (c < C) {
        float acc = d[c];
        for (int32_t j = start[k]; j < start[k + 1]; j++)
            acc = __fadd_rn(acc, __fmul_rn(scale, dout[(int64_t)rows[j] * C + c]));
        d[c] = acc;
    }
}

void cu_embedding_bwd(float *dtable, const int32_t *ids, const int32_t *start, const int32_t *rows, const float *dout,
                      int64_t n, int64_t C, float scale) {
    if (!dtable || n <= 0 || C <= 0) return;
    dim3 grid((unsigned)n, (unsigned)((C + CU_THREADS - 1) / CU_THREADS));
    embedding_bwd_kernel<<<grid, CU_THREADS, 0, cu_stream()>>>(dtable, ids, start, rows, dout, C, scale);
    CU_LAUNCHED("embedding_bwd_kernel");
}
