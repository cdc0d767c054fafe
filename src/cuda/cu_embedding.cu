// Embedding lookup out[N,C] = scale * table[ids[n], :], its accumulating variant, and its backward, a scatter-add
// (CPU: kernels/embedding.c). Every element is rounded as on the CPU: all three equal the CPU bit for bit.
// Backward without atomics: the first occurrence n of each id owns the table row ids[n] (the block of n checks that
// no earlier n' has the same id, else it leaves) and adds scale * dout[m, :] for every m >= n with that id, in
// increasing m: the CPU's order of the sum, each row written by one block only. The ids are scanned in windows of
// CU_THREADS (cu_index.h cu_emb_window).
#include "cu_kern.cuh"
#include "cu_index.h"
#include "cu_ops.h"

__global__ void embedding_gather_kernel(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C,
                                        float scale, int acc) {
    CU_FOR(i, N * C) {
        int64_t n = i / C, c = i % C;
        float t = __fmul_rn(scale, table[(int64_t)ids[n] * C + c]);
        out[i] = __fadd_rn(acc ? out[i] : 0.0f, t);
    }
}

static void gather(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale, int acc) {
    if (N <= 0 || C <= 0) return;
    embedding_gather_kernel<<<cu_grid(N * C), CU_THREADS, 0, cu_stream()>>>(out, ids, table, N, C, scale, acc);
    CU_LAUNCHED("embedding_gather_kernel");
}

void cu_embedding_fwd(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale) {
    gather(out, ids, table, N, C, scale, 0);
}

void cu_embedding_acc(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale) {
    gather(out, ids, table, N, C, scale, 1);
}

// block n (CU_THREADS threads): if n is the first occurrence of ids[n], dtable[ids[n], :] += scale * dout[m, :]
// for m = n, n+1, ... with ids[m] == ids[n], in that order
__global__ void embedding_bwd_kernel(float *dtable, const int32_t *ids, const float *dout, int64_t N, int64_t C,
                                     float scale) {
    __shared__ int32_t win[CU_THREADS];
    int64_t n = blockIdx.x;
    int32_t id = ids[n];
    int seen = 0;
    for (int64_t i = threadIdx.x; i < n; i += CU_THREADS) seen |= ids[i] == id;
    if (__syncthreads_or(seen)) return;   // an earlier row owns this id
    float *d = dtable + (int64_t)id * C;
    for (int64_t w0 = n; w0 < N; w0 += CU_THREADS) {
        int64_t len = cu_emb_window(w0, N, CU_THREADS);
        win[threadIdx.x] = threadIdx.x < len ? ids[w0 + threadIdx.x] : -1;
        if (!__syncthreads_count(threadIdx.x < len && win[threadIdx.x] == id)) continue;   // no row of id here
        for (int64_t c = threadIdx.x; c < C; c += CU_THREADS) {
            float acc = d[c];
            for (int64_t k = 0; k < len; k++)
                if (win[k] == id) acc = __fadd_rn(acc, __fmul_rn(scale, dout[(w0 + k) * C + c]));
            d[c] = acc;
        }
        __syncthreads();   // win is rewritten next
    }
}

void cu_embedding_bwd(float *dtable, const int32_t *ids, const float *dout, int64_t N, int64_t C, float scale) {
    if (!dtable || N <= 0 || C <= 0) return;
    embedding_bwd_kernel<<<(unsigned)N, CU_THREADS, 0, cu_stream()>>>(dtable, ids, dout, N, C, scale);
    CU_LAUNCHED("embedding_bwd_kernel");
}
