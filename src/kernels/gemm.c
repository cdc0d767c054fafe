// The product seam of k_gemm (gemm.h): OpenBLAS sgemm on one thread, a product cut over the OpenMP threads. Both
// paths of k_gemm use it, the fp32 one (linear.c) and the bf16 one (gemm_bf16.c); it calls neither.
#include "kernels/gemm.h"
#include "core/alloc.h"
#include <cblas.h>
#include <omp.h>
#include <stdatomic.h>
#include <string.h>

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

static void sgemm(const k_gemm_op *g) {
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, (int)g->M,
                (int)g->N, (int)g->K, g->alpha, g->a, (int)g->lda, g->b, (int)g->ldb, g->beta, g->c, (int)g->ldc);
}

// OpenBLAS (0.3.17+, x86_64 SkylakeX kernels) computes a product of M*N*K <= SMALL_MNK with its small-matrix kernels,
// whose sums run in another order than the whole product's kernel, and which differ among themselves by M (at
// 192x32 NT the rows of 1-6 row products differ from the same rows among more; tests/unit/test_gemm_rows.c). Such
// a product runs with zero rows below its own, as many as make M*N*K exceed SMALL_MNK (at most 10^6 products more:
// tens of microseconds), so that a row's sums are those of the large-product kernel in every product
#define SMALL_MNK 1e6
void k_gemm_sgemm(const k_gemm_op *g) {
    double nk = (double)g->N * (double)g->K;
    if ((double)g->M * nk > SMALL_MNK)
        sgemm(g);
    else
        k_gemm_padded(g, (int64_t)(SMALL_MNK / nk) + 1, 1, sgemm);
}

void *k_scratch(void **buf, size_t *cap, size_t bytes, const char *what) {
    if (bytes > *cap) {
        os_free(*buf);
        *buf = os_alloc(bytes, what);
        *cap = bytes;
    }
    return *buf;
}

static _Thread_local void *pad_buf[3];   // k_gemm_padded's a, b, c
static _Thread_local size_t pad_cap[3];

static void *pad_scratch(int i, size_t bytes) {   // zeroed
    return memset(k_scratch(&pad_buf[i], &pad_cap[i], bytes, "padded product scratch"), 0, bytes);
}

// dst (row stride dld) = src[rows, cols] (row stride sld), esz bytes an element
static void copy_block(void *dst, int64_t dld, const void *src, int64_t sld, int64_t rows, int64_t cols, int esz) {
    for (int64_t r = 0; r < rows; r++)
        memcpy((char *)dst + r * dld * esz, (const char *)src + r * sld * esz, (size_t)(cols * esz));
}

void k_gemm_padded(const k_gemm_op *g, int64_t m_min, int64_t n_min, k_gemm_kernel *kern) {
    int64_t M = g->M, N = g->N, K = g->K, Mp = M < m_min ? m_min : M, Np = N < n_min ? n_min : N;
    if (Mp == M && Np == N) {
        kern(g);
        return;
    }
    k_gemm_op p = *g;
    p.M = Mp, p.N = Np, p.ldc = Np;
    if (Mp > M) {   // op(a) [Mp, K] as a is stored: rows [Mp, K] (ta 0) or columns [K, Mp] (ta 1), the new ones zero
        p.lda = g->ta ? Mp : K;
        void *a = pad_scratch(0, (size_t)(Mp * K * g->esz));
        copy_block(a, p.lda, g->a, g->lda, g->ta ? K : M, g->ta ? M : K, g->esz);
        p.a = a;
    }
    if (Np > N) {   // op(b) [K, Np]: stored [K, Np] (tb 0) or [Np, K] (tb 1)
        p.ldb = g->tb ? K : Np;
        void *b = pad_scratch(1, (size_t)(Np * K * g->esz));
        copy_block(b, p.ldb, g->b, g->ldb, g->tb ? N : K, g->tb ? K : N, g->esz);
        p.b = b;
    }
    p.c = pad_scratch(2, sizeof(float) * (size_t)(Mp * Np));
    copy_block(p.c, Np, g->c, g->ldc, M, N, 4);   // beta * c needs c (for beta 0 the values are not read)
    kern(&p);
    copy_block(g->c, g->ldc, p.c, Np, M, N, 4);
}

// Products of at least SPLIT_FLOPS are cut along the longer of M and N into one block per OpenMP thread (multiples
// of 16 rows or columns, at least SPLIT_MIN wide), taken by the threads as they come free; each block is an
// independent single-threaded product, so every element of c is summed in the same order however the product is
// cut. One block per thread, not more: each block packs its own copy of the operand that all blocks share (op(a)
// when the columns are cut), so more blocks cost more (bench/gemm_split.c: 4 blocks +3%, 2 blocks +1% of the CPU
// time of one decoder layer's products and the head's), and smaller blocks did not help a thread that the
// scheduler takes off its core: it holds its block either way (bench/gemm_threads.c; docs/performance.md "Threads
// vs ranks: where the 2-thread process loses time").
// No block of M*N*K <= SMALL_MNK: k_gemm_sgemm would pad it to a larger product (the small-matrix kernels sum in
// another order), so such a cut would cost more than it saves.
enum { SPLIT_FLOPS = 1 << 22, SPLIT_ALIGN = 16, SPLIT_MIN = 128, SPLIT_PER_THREAD = 1 };
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
