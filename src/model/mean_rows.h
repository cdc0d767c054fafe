// Rows added by a vocabulary resize, initialised as transformers' resize_token_embeddings(mean_resizing=True)
// (the default since transformers 4.46, the reference's stack): each new row is drawn from the multivariate
// normal N(mu, 1e-9 * S) where mu [C] is the mean of the checkpoint's n rows and S = Xc^T Xc / n [C, C] their
// (biased) covariance, Xc = X - mu. When 1e-9 * S is not positive definite every new row is mu itself.
// A row r is sampled as mu + L z_r, L = chol(1e-9 * S) lower, z_r [C] standard normals of the counter RNG at
// flat indices r*C .. r*C+C-1 (same distribution as torch's MultivariateNormal, which also draws loc + L z).
// Cost (docs/training.md): two passes over the checkpoint rows, n*C*C multiply-adds for S (dsyrk, double),
// C^3/3 for the Cholesky (LAPACK dpotrf, in place: L is S's storage), C*C/2 per sampled row (dtrmm). Memory at
// the peak (the second pass): S [C, C] in double plus a block of OS_MEAN_ROWS_READ rows in fp32 and in double
// (os_plan_mean_rows_bytes, src/train/plan.c); every checkpoint row is read, so its pages are touched.
#pragma once
#include "io/safetensors.h"
#include <stdint.h>

#define OS_MEAN_ROWS_READ 1024   // rows read per block

typedef struct {
    int64_t n, C;   // checkpoint rows, row width
    double *mean;   // [C]
    double *L;      // [C, C] row-major, lower triangle = chol(1e-9 * S); NULL when not positive definite
} os_mean_rows;

// Statistics of the 2-D checkpoint tensor t [n, C] (any float dtype, read as fp32 like transformers).
// The Cholesky is attempted only when n > C (else S has rank <= n - 1 < C: not positive definite).
int os_mean_rows_init(os_mean_rows *st, const os_st_tensor *t, const char *name);
// Fill flat elements [s, s+n) of the resized parameter (row-major [rows, C]; s >= st->n * C, rows past the
// checkpoint's) with the samples of the stream key. Rows are computed in blocks aligned to absolute row numbers,
// so any slicing of the range gives bit-identical values.
void os_mean_rows_fill(const os_mean_rows *st, uint64_t key, int64_t s, int64_t n, float *dst);
void os_mean_rows_free(os_mean_rows *st);
