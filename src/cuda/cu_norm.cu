// RMSNorm (Qwen2) forward/backward and LayerNorm (Whisper) forward over rows x[N,C] (CPU: kernels/norm.c).
// One block per row; the row statistics are summed in double (a fixed tree instead of the CPU's loop: the double
// results differ by about 1e-16 relative, so the float statistics almost always equal the CPU's bits) and every
// float operation is rounded as on the CPU: rmsnorm_fwd and layernorm_fwd equal the CPU except where a double sum
// rounds to another float (1 ulp of rstd); rmsnorm_bwd's dinp within a few ulp. The weight gradient sums each
// column over the rows in double, in CU_NORM_CHUNKS fixed chunks of rows then the chunks in order (no atomics):
// relative difference from the CPU's double loop about 1e-15 before its single rounding to float.
#include "cu_kern.cuh"
#include "cu_ops.h"

enum { CU_NORM_CHUNKS = 64, CU_NORM_COLS = 32, CU_NORM_ROWS = 8 };   // dw: row chunks; block of 32 x 8 threads

// y = w * (x * rstd), rstd = 1 / sqrt(mean(x^2) + eps); the variance rounded to float as in Qwen2RMSNorm. res: x +=
// res first (each thread reads back only the elements it wrote)
__global__ void rmsnorm_fwd_kernel(float *out, float *rstd, float *inp, const float *res, const float *w, int64_t C,
                                   float eps) {
    float *x = inp + blockIdx.x * C;
    double ss = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        if (res) x[c] = __fadd_rn(x[c], res[blockIdx.x * C + c]);
        ss += (double)x[c] * x[c];
    }
    ss = cu_block_sum(ss);
    float var = C > 0 ? (float)(ss / (double)C) : 0.0f;
    float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) out[blockIdx.x * C + c] = __fmul_rn(w[c], __fmul_rn(x[c], r));
    if (rstd && threadIdx.x == 0) rstd[blockIdx.x] = r;
}

void cu_rmsnorm_fwd(float *out, float *rstd, float *x, const float *res, const float *w, int64_t N, int64_t C,
                    float eps) {
    if (N <= 0) return;
    rmsnorm_fwd_kernel<<<(unsigned)N, CU_THREADS, 0, cu_stream()>>>(out, rstd, x, res, w, C, eps);
    CU_LAUNCHED("rmsnorm_fwd_kernel");
}

// dx += r * (w*g) - r^3/C * x * sum(w*g*x), one block per row
__global__ void rmsnorm_bwd_dinp_kernel(float *dinp, const float *dout, const float *inp, const float *w,
                                        const float *rstd, int64_t C) {
    const float *x = inp + blockIdx.x * C, *g = dout + blockIdx.x * C;
    double dot = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dot += (double)w[c] * g[c] * x[c];
    dot = cu_block_sum(dot);
    double r = rstd[blockIdx.x];
    float k = (float)(r * r * r * dot / (double)C), rf = (float)r;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float *d = dinp + blockIdx.x * C + c;
        *d = __fadd_rn(*d, __fsub_rn(__fmul_rn(rf, __fmul_rn(w[c], g[c])), __fmul_rn(k, x[c])));
    }
}

// part[chunk, c] = sum over the chunk's rows n of dout[n,c] * inp[n,c] * rstd[n] (double); block (32 x 8 threads)
// = 32 columns x one chunk, its 8 thread rows summed in order
__global__ void rmsnorm_dw_part_kernel(double *part, const float *dout, const float *inp, const float *rstd,
                                       int64_t N, int64_t C, int64_t rows_per_chunk) {
    __shared__ double acc[CU_NORM_ROWS][CU_NORM_COLS];
    int64_t c = (int64_t)blockIdx.x * CU_NORM_COLS + threadIdx.x, chunk = blockIdx.y;
    int64_t n0 = chunk * rows_per_chunk, n1 = n0 + rows_per_chunk < N ? n0 + rows_per_chunk : N;
    double s = 0.0;
    if (c < C)
        for (int64_t n = n0 + threadIdx.y; n < n1; n += CU_NORM_ROWS)
            s += (double)dout[n * C + c] * inp[n * C + c] * rstd[n];
    acc[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int i = 1; i < CU_NORM_ROWS; i++) s += acc[i][threadIdx.x];
        part[chunk * C + c] = s;
    }
}

// dw[c] += the chunks' partial sums, in chunk order
__global__ void rmsnorm_dw_total_kernel(float *dw, const double *part, int64_t C) {
    CU_FOR(c, C) {
        double s = 0.0;
        for (int64_t k = 0; k < CU_NORM_CHUNKS; k++) s += part[k * C + c];
        dw[c] = __fadd_rn(dw[c], (float)s);
    }
}

void cu_rmsnorm_bwd(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd,
                    int64_t N, int64_t C) {
    if (N <= 0 || C <= 0) return;
    if (dinp) {
        rmsnorm_bwd_dinp_kernel<<<(unsigned)N, CU_THREADS, 0, cu_stream()>>>(dinp, dout, inp, w, rstd, C);
        CU_LAUNCHED("rmsnorm_bwd_dinp_kernel");
    }
    if (!dw) return;
    double *part = (double *)cu_scratch((int64_t)sizeof(double) * CU_NORM_CHUNKS * C, "rmsnorm dw partial sums");
    dim3 grid(cu_blocks(C, CU_NORM_COLS), CU_NORM_CHUNKS), block(CU_NORM_COLS, CU_NORM_ROWS);
    rmsnorm_dw_part_kernel<<<grid, block, 0, cu_stream()>>>(part, dout, inp, rstd, N, C,
                                                            (N + CU_NORM_CHUNKS - 1) / CU_NORM_CHUNKS);
    CU_LAUNCHED("rmsnorm_dw_part_kernel");
    rmsnorm_dw_total_kernel<<<cu_grid(C), CU_THREADS, 0, cu_stream()>>>(dw, part, C);
    CU_LAUNCHED("rmsnorm_dw_total_kernel");
    cu_scratch_free(part);
}

// y = (x - mean) * rstd * w + b, biased variance; w or b NULL means 1 or 0; one block per row
__global__ void layernorm_fwd_kernel(float *out, float *mean, float *rstd, const float *inp, const float *w,
                                     const float *b, int64_t C, float eps) {
    const float *x = inp + blockIdx.x * C;
    double s = 0.0, ss = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += x[c];
    s = cu_block_sum(s);
    double m = C > 0 ? s / (double)C : 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) ss += (x[c] - m) * (x[c] - m);
    ss = cu_block_sum(ss);
    double var = C > 0 ? ss / (double)C : 0.0;
    float r = (float)(1.0 / sqrt(var + (double)eps)), mf = (float)m;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float y = __fmul_rn(__fsub_rn(x[c], mf), r);
        out[blockIdx.x * C + c] = __fadd_rn(w ? __fmul_rn(y, w[c]) : y, b ? b[c] : 0.0f);
    }
    if (threadIdx.x == 0) {
        if (mean) mean[blockIdx.x] = mf;
        if (rstd) rstd[blockIdx.x] = r;
    }
}

void cu_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                      int64_t N, int64_t C, float eps) {
    if (N <= 0) return;
    layernorm_fwd_kernel<<<(unsigned)N, CU_THREADS, 0, cu_stream()>>>(out, mean, rstd, inp, w, b, C, eps);
    CU_LAUNCHED("layernorm_fwd_kernel");
}
