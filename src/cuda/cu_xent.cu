// Softmax cross-entropy over a chunk of rows logits[N, V] (row stride ld), fused with its gradient written in place
// (CPU: kernels/xent.c): rows whose label is -100 become 0, the others dscale * (softmax - onehot); *sum += the
// rows' summed -log softmax[label], *ncorrect += the rows whose first maximum is the label.
// Deterministic without atomics: block j of CU_XENT_BLOCKS takes rows j, j + CU_XENT_BLOCKS, ... (cu_index.h
// cu_xent_row) in order and keeps its partial loss and count in a static device array; one block then adds the
// partials to *sum and *ncorrect in block order.
// Tolerance against the CPU: libdevice's expf against k_expf (each within 2 ulp) and another order of the row's
// double sum: gradient entries within a few ulp (relative 1e-6), each row's loss within about 1e-6 relative, the
// correct count equal (the maximum and its first index are exact).
#include "cu_kern.cuh"
#include "cu_index.h"
#include "cu_ops.h"

enum { CU_XENT_BLOCKS = 256, CU_XENT_THREADS = 512 };
static __device__ double xent_loss_part[CU_XENT_BLOCKS];    // calls are ordered on cu_stream()
static __device__ long long xent_correct_part[CU_XENT_BLOCKS];

__global__ void xent_rows_kernel(float *logits, int64_t ld, const int32_t *labels, int64_t N, int64_t V,
                                 float dscale) {
    double loss = 0.0;   // meaningful in thread 0
    long long correct = 0;
    for (int64_t i = 0;; i++) {
        int64_t n = cu_xent_row(blockIdx.x, i, CU_XENT_BLOCKS);
        if (n >= N) break;
        float *x = logits + n * ld;
        int32_t y = labels[n];
        if (y < 0 || V <= 0) {   // ignored row (-100)
            for (int64_t c = threadIdx.x; c < V; c += blockDim.x) x[c] = 0.0f;
            continue;
        }
        float mx = -INFINITY;
        for (int64_t c = threadIdx.x; c < V; c += blockDim.x) mx = fmaxf(mx, x[c]);
        mx = cu_block_max(mx);
        double sum = 0.0;
        int64_t arg = V;   // the first index holding the maximum
        for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
            sum += (double)expf(x[c] - mx);
            if (x[c] == mx && c < arg) arg = c;
        }
        float xy = x[y];   // read before the gradient overwrites the row (the reductions below hold barriers)
        sum = cu_block_sum(sum);
        arg = cu_block_min(arg);
        if (arg == V) arg = 0;
        float k = (float)((double)dscale / sum);
        for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
            float g = __fmul_rn(expf(x[c] - mx), k);
            x[c] = c == y ? __fsub_rn(g, dscale) : g;
        }
        if (threadIdx.x == 0) {
            loss += log(sum) - ((double)xy - mx);
            correct += arg == y;
        }
    }
    if (threadIdx.x == 0) {
        xent_loss_part[blockIdx.x] = loss;
        xent_correct_part[blockIdx.x] = correct;
    }
}

// one block of CU_XENT_BLOCKS threads: the partials in block order
__global__ void xent_total_kernel(double *sum, int64_t *ncorrect) {
    double loss = cu_block_sum(xent_loss_part[threadIdx.x]);
    long long correct = cu_block_sum(xent_correct_part[threadIdx.x]);
    if (threadIdx.x == 0) {
        *sum += loss;
        if (ncorrect) *ncorrect += correct;
    }
}

void cu_xent_fwd_bwd(float *logits, int64_t ld, const int32_t *labels, int64_t N, int64_t V, float dscale,
                     double *sum, int64_t *ncorrect) {
    if (N <= 0) return;
    xent_rows_kernel<<<CU_XENT_BLOCKS, CU_XENT_THREADS, 0, cu_stream()>>>(logits, ld, labels, N, V, dscale);
    CU_LAUNCHED("xent_rows_kernel");
    xent_total_kernel<<<1, CU_XENT_BLOCKS, 0, cu_stream()>>>(sum, ncorrect);
    CU_LAUNCHED("xent_total_kernel");
}
