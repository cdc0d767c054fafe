// Row gathers and scatter-adds over an index list on the backend (the seam's gather_rows, scatter_add_rows): one
// call in place of a loop of row copies or adds (the embedding's fetched rows, the loss's row order, the speech
// splice). Shapes and rules at their lines in kernels/ops_list.h.
#include "kernels/kernels.h"
#include <string.h>

void k_gather_rows(float *out, const float *src, const int32_t *idx, int64_t n, int64_t C) {
#pragma omp parallel for schedule(static) if (n * C >= K_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        if (idx[i] >= 0) memcpy(out + i * C, src + (int64_t)idx[i] * C, sizeof(float) * (size_t)C);
}

// rows may repeat in idx: threads split the columns, each element's sum runs over i in increasing order
void k_scatter_add_rows(float *dst, const float *src, const int32_t *idx, int64_t n, int64_t C) {
    enum { BLK = 64 };
#pragma omp parallel for schedule(static) if (n * C >= K_PAR_MIN)
    for (int64_t c0 = 0; c0 < C; c0 += BLK) {
        int64_t c1 = c0 + BLK < C ? c0 + BLK : C;
        for (int64_t i = 0; i < n; i++) {
            if (idx[i] < 0) continue;
            float *d = dst + (int64_t)idx[i] * C;
            const float *s = src + i * C;
            for (int64_t c = c0; c < c1; c++) d[c] += s[c];
        }
    }
}
