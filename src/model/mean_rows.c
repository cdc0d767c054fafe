#include "model/mean_rows.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include <cblas.h>
#include <math.h>
#include <string.h>
#undef I   // the imaginary unit of <complex.h>, which cblas.h pulls in

// LAPACK's Cholesky (OpenBLAS exports it; Debian ships no lapacke.h for it). Column-major.
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);

enum { READ_ROWS = OS_MEAN_ROWS_READ, SAMPLE_ROWS = 256 };

// rows [r0, r0+nr) of t as doubles, minus mean when mean != NULL: out[nr, C]
static int read_rows(const os_st_tensor *t, int64_t C, int64_t r0, int64_t nr, const double *mean, float *tmp,
                     double *out) {
    if (os_st_read_f32(t, r0 * C, nr * C, tmp) < 0) return -1;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < nr; i++)
        for (int64_t j = 0; j < C; j++) out[i * C + j] = (double)tmp[i * C + j] - (mean ? mean[j] : 0.0);
    return 0;
}

int os_mean_rows_init(os_mean_rows *st, const os_st_tensor *t, const char *name) {
    memset(st, 0, sizeof *st);
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1)
        return os_errf("tensor '%s': mean resizing needs a 2-D tensor with rows", name);
    int64_t n = t->shape[0], C = t->shape[1];
    st->n = n, st->C = C;
    st->mean = os_alloc(sizeof(double) * (size_t)C, "mean of embedding rows");
    float *tmp = os_alloc(sizeof(float) * (size_t)(READ_ROWS * C), "embedding rows (read)");
    double *blk = os_alloc(sizeof(double) * (size_t)(READ_ROWS * C), "embedding rows (double)");
    int rc = 0;
    // pass 1: mean, summed in row order per column (the same on every rank)
    for (int64_t r0 = 0; rc == 0 && r0 < n; r0 += READ_ROWS) {
        int64_t nr = n - r0 < READ_ROWS ? n - r0 : READ_ROWS;
        rc = read_rows(t, C, r0, nr, NULL, tmp, blk);
#pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < C; j++)
            for (int64_t i = 0; i < nr; i++) st->mean[j] += blk[i * C + j];
    }
    for (int64_t j = 0; j < C; j++) st->mean[j] /= (double)n;
    // pass 2: S = Xc^T Xc / n (lower triangle), then L = chol(1e-9 S)
    if (rc == 0 && n > C) {
        double *S = os_alloc(sizeof(double) * (size_t)(C * C), "covariance of embedding rows");
        for (int64_t r0 = 0; rc == 0 && r0 < n; r0 += READ_ROWS) {
            int64_t nr = n - r0 < READ_ROWS ? n - r0 : READ_ROWS;
            rc = read_rows(t, C, r0, nr, st->mean, tmp, blk);
            if (rc == 0)
                cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, (int)C, (int)nr, 1.0, blk, (int)C, 1.0, S, (int)C);
        }
        const double scale = 1e-9 / (double)n;
        for (int64_t i = 0; i < C; i++)
            for (int64_t j = 0; j <= i; j++) S[i * C + j] *= scale;
        // row-major lower = column-major upper: Fortran's U (A = U^T U) is our L (A = L L^T)
        int nn = (int)C, info = 0;
        if (rc == 0) dpotrf_("U", &nn, S, &nn, &info);
        if (rc == 0 && info == 0) {
            for (int64_t i = 0; i < C; i++)
                for (int64_t j = i + 1; j < C; j++) S[i * C + j] = 0.0;   // the upper part still holds S
            st->L = S;
        } else {
            os_free(S);
        }
    }
    os_free(tmp);
    os_free(blk);
    if (rc < 0) {
        os_mean_rows_free(st);
        return os_err_ctx("tensor '%s'", name);
    }
    return 0;
}

void os_mean_rows_fill(const os_mean_rows *st, uint64_t key, int64_t s, int64_t n, float *dst) {
    int64_t C = st->C;
    double *z = st->L ? os_alloc(sizeof(double) * (size_t)(SAMPLE_ROWS * C), "new embedding rows") : NULL;
    for (int64_t e = s; e < s + n;) {
        int64_t r = e / C;
        int64_t b0 = r / SAMPLE_ROWS * SAMPLE_ROWS, b1 = b0 + SAMPLE_ROWS;   // aligned block of rows
        if (b0 < st->n) b0 = st->n;
        int64_t e1 = b1 * C < s + n ? b1 * C : s + n;                       // elements of this block we need
        if (z) {
            int64_t nr = b1 - b0;
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < nr * C; i++) z[i] = os_rng_normal(key, (uint64_t)(b0 * C + i));
            // z[nr, C] := z @ L^T, row i becomes L z_i
            cblas_dtrmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)nr, (int)C, 1.0, st->L,
                        (int)C, z, (int)C);
        }
        for (; e < e1; e++) {
            int64_t j = e % C;
            dst[e - s] = (float)(st->mean[j] + (z ? z[e - b0 * C] : 0.0));
        }
    }
    os_free(z);
}

void os_mean_rows_free(os_mean_rows *st) {
    os_free(st->mean);
    os_free(st->L);
    memset(st, 0, sizeof *st);
}
