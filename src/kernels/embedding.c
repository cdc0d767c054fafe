// Embedding lookup: the sum over an input's R id rows of scale * table[id, :] (SLAM-Omni's mean of its G+1 rows in
// one call), and its backward, a scatter-add grouped by table row. Shapes and rules at their lines in
// kernels/ops_list.h.
#include "kernels/kernels.h"

// out[b*L + l, :] = sum over r of scale * table[ids[(b*R + r)*L + l], :], the rows added in increasing r from 0
void k_embedding_fwd(float *out, const int32_t *ids, const float *table, int64_t B, int64_t R, int64_t L, int64_t C,
                     float scale) {
#pragma omp parallel for schedule(static) if (B * L * R * C >= K_PAR_MIN)
    for (int64_t n = 0; n < B * L; n++) {
        const int32_t *id = ids + (n / L) * R * L + n % L;
        float *o = out + n * C;
        for (int64_t c = 0; c < C; c++) o[c] = 0.0f;
        for (int64_t r = 0; r < R; r++) {
            const float *row = table + (int64_t)id[r * L] * C;
            for (int64_t c = 0; c < C; c++) o[c] += scale * row[c];
        }
    }
}

// each (distinct table row ids[k], block of columns) is one thread's, its dout rows added in the list's order (a
// frequent id, e.g. a padding token, is spread over the threads by its columns; its rows may be many: dynamic)
void k_embedding_bwd(float *dtable, const int32_t *ids, const int32_t *start, const int32_t *rows, const float *dout,
                     int64_t n, int64_t C, float scale) {
    enum { BLK = 64 };
    int64_t nb = (C + BLK - 1) / BLK;
    if (!dtable) return;
#pragma omp parallel for schedule(dynamic, 8) if (n > 0 && start[n] * C >= K_PAR_MIN)
    for (int64_t kb = 0; kb < n * nb; kb++) {
        int64_t k = kb / nb, c0 = kb % nb * BLK, c1 = c0 + BLK < C ? c0 + BLK : C;
        float *d = dtable + (int64_t)ids[k] * C;
        for (int64_t j = start[k]; j < start[k + 1]; j++) {
            const float *g = dout + (int64_t)rows[j] * C;
            for (int64_t c = c0; c < c1; c++) d[c] += scale * g[c];
        }
    }
}
