// Row gathers and scatter-adds over an index list on the backend (the seam's gather_rows, scatter_add_rows), and a
// row broadcast over rows (add_row_bias, sum_rows): one call in place of a loop of row copies or adds (the
// embedding's fetched rows, the loss's row order, the speech splice, the adapter's bias and its gradient). Shapes
// and rules at their lines in kernels/ops_list.h.
#include "kernels/kernels.h"
#include "kernels/ops.h"
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

void k_add_row_bias(float *x, const float *b, int64_t n, int64_t C) {
#pragma omp parallel for schedule(static) if (n * C >= K_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++) x[i * C + c] += b[c];
}

// threads split the columns, each column's sum runs over i in increasing order
void k_sum_rows(float *out, const float *x, int64_t n, int64_t C) {
    enum { BLK = 64 };
#pragma omp parallel for schedule(static) if (n * C >= K_PAR_MIN)
    for (int64_t c0 = 0; c0 < C; c0 += BLK) {
        int64_t c1 = c0 + BLK < C ? c0 + BLK : C;
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = c0; c < c1; c++) out[c] += x[i * C + c];
    }
}

int32_t *os_ids_upload(const int32_t *h, int64_t n, const char *what) {
    int32_t *d = os_k->alloc((int64_t)sizeof(int32_t) * (n ? n : 1), what);
    os_k->upload(d, h, (int64_t)sizeof(int32_t) * n);
    return d;
}
