// Linear layers and general matrix products on OpenBLAS sgemm (row-major, weights w[O,I] as in PyTorch); in bf16
// by gemm_bf16.c under k_gemm_set_bf16.
#include "kernels/kernels.h"
#include "kernels/gemm.h"
#include <cblas.h>
#include <omp.h>
#include <stdatomic.h>
#undef I   // the imaginary unit of <complex.h>, which cblas.h pulls in; I is a size here

// Threading: OpenBLAS runs single-threaded and k_gemm splits a product over the OpenMP threads itself, so one
// thread pool (OpenMP's) serves every kernel. With OpenBLAS's own pthread pool next to it, each idle pool keeps
// spinning on the cores the other computes on (OpenBLAS's workers yield in a loop for a while after each call,
// libgomp's after each parallel region); on 2 cores that took about half of a training step (docs/performance.md).
void k_gemm_blas_single_thread(void) {
    static atomic_int done;
    if (atomic_load_explicit(&done, memory_order_acquire)) return;
    openblas_set_num_threads(1);
    atomic_store_explicit(&done, 1, memory_order_release);
}

void k_gemm_sgemm(const k_gemm_op *g) {
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, (int)g->M,
                (int)g->N, (int)g->K, g->alpha, g->a, (int)g->lda, g->b, (int)g->ldb, g->beta, g->c, (int)g->ldc);
}

// Products of at least SPLIT_FLOPS are cut along the longer of M and N into one block per OpenMP thread (multiples
// of 16 rows or columns, at least SPLIT_MIN wide), taken by the threads as they come free; each block is an
// independent single-threaded product, so every element of c is summed in the same order however the product is
// cut. One block per thread, not more: each block packs its own copy of the operand that all blocks share (op(a)
// when the columns are cut), so more blocks cost more (bench/gemm_split.c: 4 blocks +3%, 2 blocks +1% of the CPU
// time of one decoder layer's products and the head's), and smaller blocks did not help a thread that the
// scheduler takes off its core: it holds its block either way (bench/gemm_threads.c; docs/performance.md "Threads
// vs ranks: where the 2-thread process loses time").
// No block of M*N*K <= SMALL_MNK: OpenBLAS (0.3.17+, x86_64 SkylakeX kernels) computes those with its small-matrix
// kernel, which sums in another order than the whole product's kernel (bench/gemm_split.c at 64 rows: 8 blocks of
// 16 columns of 64x128x896 differ), so such a cut would make the numbers depend on the thread count.
enum { SPLIT_FLOPS = 1 << 22, SPLIT_ALIGN = 16, SPLIT_MIN = 128, SPLIT_PER_THREAD = 1 };
#define SMALL_MNK 1e6
void k_gemm_run(const k_gemm_op *g, k_gemm_kernel *kern) {
    int64_t M = g->M, N = g->N;
    int64_t nt = omp_in_parallel() ? 1 : omp_get_max_threads(), D = M > N ? M : N;
    int64_t nblk = 2 * M * N * g->K < SPLIT_FLOPS ? 1 : nt * SPLIT_PER_THREAD;
    if (nblk > D / SPLIT_MIN) nblk = D / SPLIT_MIN / nt * nt;   // a multiple of the threads
    if (nt < 2 || nblk < 2) {
        kern(g);
        return;
    }
    int64_t blk = ((D + nblk - 1) / nblk + SPLIT_ALIGN - 1) / SPLIT_ALIGN * SPLIT_ALIGN;
    int64_t last = D - (D - 1) / blk * blk;   // the last block's width (the narrowest)
    if ((double)last * (double)(M > N ? N : M) * (double)g->K <= SMALL_MNK) {
        kern(g);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads((int)nt)
    for (int64_t lo = 0; lo < D; lo += blk) {
        k_gemm_op s = k_gemm_part(g, lo, D - lo < blk ? D - lo : blk);
        kern(&s);
    }
}

k_gemm_op k_gemm_part(const k_gemm_op *g, int64_t lo, int64_t n) {
    k_gemm_op s = *g;
    const char *a = g->a, *b = g->b;
    if (g->M > g->N)   // the rows of c (and of op(a)), else its columns (and those of op(b))
        s.M = n, s.a = a + (g->ta ? lo : lo * g->lda) * g->esz, s.c = g->c + lo * g->ldc;
    else
        s.N = n, s.b = b + (g->tb ? lo * g->ldb : lo) * g->esz, s.c = g->c + lo;
    return s;
}

// c[M,N] = alpha * op(a) @ op(b) + beta * c. Sizes of 0 are allowed (BLAS would reject lda = 0).
// Under k_gemm_set_bf16(1) the inputs are rounded to bf16 (gemm_bf16.c).
void k_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
            const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {   // op(a) @ op(b) is all zeros: c = beta * c (beta 0 overwrites, as BLAS does)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
        return;
    }
    k_gemm_blas_single_thread();
    k_gemm_op g = {ta, tb, M, N, K, alpha, beta, a, b, lda, ldb, ldc, c, (int)sizeof(float)};
    double t0 = k_gemm_times_start();
    int bf16 = k_gemm_bf16_on();
    if (bf16)
        k_gemm_bf16(&g);
    else
        k_gemm_run(&g, k_gemm_sgemm);
    k_gemm_times_end(t0, &g, bf16);
}

// out[N,O] = inp[N,I] @ w[O,I]^T + bias[O]
void k_linear_fwd(float *out, const float *inp, const float *w, const float *bias, int64_t N, int64_t I, int64_t O) {
    if (N <= 0 || O <= 0) return;
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int64_t n = 0; n < N; n++)
            for (int64_t o = 0; o < O; o++) out[n * O + o] = bias[o];
    }
    k_gemm(0, 1, N, O, I, 1.0f, inp, I, w, I, bias ? 1.0f : 0.0f, out, O);
}

// dinp[N,I] += dout[N,O] @ w[O,I];  dw[O,I] += dout^T @ inp;  dbias[O] += column sums of dout (in double)
void k_linear_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                  int64_t N, int64_t I, int64_t O) {
    if (dinp) k_gemm(0, 0, N, I, O, 1.0f, dout, O, w, I, 1.0f, dinp, I);
    if (dw) k_gemm(1, 0, O, I, N, 1.0f, dout, O, inp, I, 1.0f, dw, I);
    if (dbias) {
        enum { BLK = 256 };
#pragma omp parallel for schedule(static)
        for (int64_t o0 = 0; o0 < O; o0 += BLK) {
            int64_t o1 = o0 + BLK < O ? o0 + BLK : O;
            double acc[BLK] = {0};
            for (int64_t n = 0; n < N; n++)
                for (int64_t o = o0; o < o1; o++) acc[o - o0] += dout[n * O + o];
            for (int64_t o = o0; o < o1; o++) dbias[o] += (float)acc[o - o0];
        }
    }
}
