// The product seam of k_gemm (gemm.h): OpenBLAS sgemm on one thread, a product cut over the OpenMP threads. Both
// paths of k_gemm use it, the fp32 one (linear.c) and the bf16 one (gemm_bf16.c); it calls neither.
#include "kernels/gemm.h"
#include <cblas.h>
#include <omp.h>
#include <stdatomic.h>

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
