// RMSNorm (Qwen2) and LayerNorm (Whisper) over rows x[N,C]; row statistics are accumulated in double.
#include "kernels/kernels.h"
#include <math.h>

enum { BLK = 256 };   // column block for the weight gradients (threads split columns, rows run inside)

// y = w * (x * rstd), rstd = 1 / sqrt(mean(x^2) + eps); the variance is rounded to float as in Qwen2RMSNorm. res:
// x += res first, row by row (k_add's sums)
void k_rmsnorm_fwd(float *out, float *rstd, float *inp, const float *res, const float *w, int64_t N, int64_t C,
                   float eps) {
#pragma omp parallel for schedule(static) if (N * C >= K_PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        float *x = inp + n * C;
        if (res)
            for (int64_t c = 0; c < C; c++) x[c] = x[c] + res[n * C + c];
        double ss = 0.0;
        for (int64_t c = 0; c < C; c++) ss += (double)x[c] * x[c];
        float var = C > 0 ? (float)(ss / (double)C) : 0.0f;
        float r = 1.0f / sqrtf(var + eps);
        for (int64_t c = 0; c < C; c++) out[n * C + c] = w[c] * (x[c] * r);
        if (rstd) rstd[n] = r;
    }
}

// dx = r * (w*g) - r^3/C * x * sum(w*g*x);  dw += sum_n g * x * r
void k_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd,
                   int64_t N, int64_t C) {
    if (dinp) {
#pragma omp parallel for schedule(static) if (N * C >= K_PAR_MIN)
        for (int64_t n = 0; n < N; n++) {
            const float *x = inp + n * C, *g = dout + n * C;
            double dot = 0.0;
            for (int64_t c = 0; c < C; c++) dot += (double)w[c] * g[c] * x[c];
            double r = rstd[n];
            float k = (float)(r * r * r * dot / (double)C);
            for (int64_t c = 0; c < C; c++) dinp[n * C + c] += (float)r * (w[c] * g[c]) - k * x[c];
        }
    }
    if (dw) {
#pragma omp parallel for schedule(static) if (N * C >= K_PAR_MIN)
        for (int64_t c0 = 0; c0 < C; c0 += BLK) {
            int64_t c1 = c0 + BLK < C ? c0 + BLK : C;
            double acc[BLK] = {0};
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = c0; c < c1; c++) acc[c - c0] += (double)dout[n * C + c] * inp[n * C + c] * rstd[n];
            for (int64_t c = c0; c < c1; c++) dw[c] += (float)acc[c - c0];
        }
    }
}

// y = (x - mean) * rstd * w + b, biased variance; w or b NULL means 1 or 0
void k_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                     int64_t N, int64_t C, float eps) {
#pragma omp parallel for schedule(static) if (N * C >= K_PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        double s = 0.0, ss = 0.0;
        for (int64_t c = 0; c < C; c++) s += x[c];
        double m = C > 0 ? s / (double)C : 0.0;
        for (int64_t c = 0; c < C; c++) ss += (x[c] - m) * (x[c] - m);
        double var = C > 0 ? ss / (double)C : 0.0;
        float r = (float)(1.0 / sqrt(var + (double)eps)), mf = (float)m;
        for (int64_t c = 0; c < C; c++) {
            float y = (x[c] - mf) * r;
            out[n * C + c] = (w ? y * w[c] : y) + (b ? b[c] : 0.0f);
        }
        if (mean) mean[n] = mf;
        if (rstd) rstd[n] = r;
    }
}

// xhat = (x - mean) * rstd, dxhat = g * w: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat));
// dw += sum_n g * xhat; db += sum_n g
void k_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *mean,
                     const float *rstd, const float *w, int64_t N, int64_t C) {
    if (dinp) {
#pragma omp parallel for schedule(static) if (N * C >= K_PAR_MIN)
        for (int64_t n = 0; n < N; n++) {
            const float *x = inp + n * C, *g = dout + n * C;
            double sg = 0.0, sgx = 0.0;
            for (int64_t c = 0; c < C; c++) {
                double dxh = (double)g[c] * (w ? w[c] : 1.0f), xh = ((double)x[c] - mean[n]) * rstd[n];
                sg += dxh;
                sgx += dxh * xh;
            }
            float mg = (float)(sg / (double)C), mgx = (float)(sgx / (double)C), r = rstd[n];
            for (int64_t c = 0; c < C; c++) {
                float xh = (x[c] - mean[n]) * r, dxh = g[c] * (w ? w[c] : 1.0f);
                dinp[n * C + c] += r * (dxh - mg - xh * mgx);
            }
        }
    }
    if (dw || db) {
#pragma omp parallel for schedule(static) if (N * C >= K_PAR_MIN)
        for (int64_t c0 = 0; c0 < C; c0 += BLK) {
            int64_t c1 = c0 + BLK < C ? c0 + BLK : C;
            double aw[BLK] = {0}, ab[BLK] = {0};
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = c0; c < c1; c++) {
                    double g = dout[n * C + c];
                    aw[c - c0] += g * ((double)inp[n * C + c] - mean[n]) * rstd[n];
                    ab[c - c0] += g;
                }
            for (int64_t c = c0; c < c1; c++) {
                if (dw) dw[c] += (float)aw[c - c0];
                if (db) db[c] += (float)ab[c - c0];
            }
        }
    }
}
