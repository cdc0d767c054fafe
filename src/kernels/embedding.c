// Embedding lookup (out[N,C] = scale * table[ids[n], :]), its accumulating variant, and its backward.
#include "kernels/kernels.h"

static void gather(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale, int acc) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *row = table + (int64_t)ids[n] * C;
        float *o = out + n * C;
        for (int64_t c = 0; c < C; c++) o[c] = (acc ? o[c] : 0.0f) + scale * row[c];
    }
}

void k_embedding_fwd(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale) {
    gather(out, ids, table, N, C, scale, 0);
}

void k_embedding_acc(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C, float scale) {
    gather(out, ids, table, N, C, scale, 1);
}

// dtable[ids[n], :] += scale * dout[n, :]. Ids may repeat, so threads split the columns, not the rows.
void k_embedding_bwd(float *dtable, const int32_t *ids, const float *dout, int64_t N, int64_t C, float scale) {
    enum { BLK = 64 };
    if (!dtable) return;
#pragma omp parallel for schedule(static)
    for (int64_t c0 = 0; c0 < C; c0 += BLK) {
        int64_t c1 = c0 + BLK < C ? c0 + BLK : C;
        for (int64_t n = 0; n < N; n++) {
            float *d = dtable + (int64_t)ids[n] * C;
            const float *g = dout + n * C;
            for (int64_t c = c0; c < c1; c++) d[c] += scale * g[c];
        }
    }
}
