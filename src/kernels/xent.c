// Softmax cross-entropy over rows of logits[N, V] (row stride ld), fused with its gradient, written in place.
#include "kernels/kernels.h"
#include "kernels/vexp.h"
#include "core/err.h"
#include <math.h>
#include <stdlib.h>

int64_t k_xent_chunk_rows(int64_t V, int64_t N, int64_t forced) {
    int64_t rows = ((int64_t)1 << 25) / (V > 0 ? V : 1);
    if (rows < 64) rows = 64;
    if (forced > 0) rows = forced;
    return rows < N ? rows : N;
}

double k_xent_fwd_bwd(float *logits, int64_t ld, const int32_t *labels, int64_t N, int64_t V, float dscale,
                      int64_t *ncorrect) {
    double loss = 0.0;
    int64_t correct = 0;
#pragma omp parallel for schedule(static) reduction(+ : loss, correct)
    for (int64_t n = 0; n < N; n++) {
        float *x = logits + n * ld;
        int32_t y = labels[n];
        if (y < 0 || V <= 0) {   // ignored row (-100)
            for (int64_t i = 0; i < V; i++) x[i] = 0.0f;
            continue;
        }
        float mx = x[0], xy = x[y];
#pragma omp simd reduction(max : mx)
        for (int64_t i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        int64_t arg = 0;   // the first maximum (0 when x[0] is NaN, as the maximum then stays NaN)
        while (arg < V && !(x[arg] == mx)) arg++;
        if (arg == V) arg = 0;
#pragma omp simd
        for (int64_t i = 0; i < V; i++) x[i] = k_expf(x[i] - mx);   // x becomes exp(x - mx), each computed once
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < V; i++) sum += x[i];
        double lse = log(sum);   // log-sum-exp minus mx
        loss += lse - ((double)xy - mx);
        correct += arg == y;
        // dscale * (softmax - onehot); softmax = exp(x - mx) / sum
        float k = (float)((double)dscale / sum);
        for (int64_t i = 0; i < V; i++) x[i] *= k;
        x[y] -= dscale;
    }
    if (ncorrect) *ncorrect += correct;
    return loss;
}
