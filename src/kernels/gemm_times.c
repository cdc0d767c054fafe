// OMNISHARD_GEMM_TIMES=1: wall time of the matrix products per shape (ta, tb, M, N, K, operand kind), printed to
// stderr at exit as a table, slowest first: where a step's products go and at what rate each shape runs (the bf16
// step against the fp32 one, docs/performance.md). Products called inside a parallel region are not counted (none
// are today: k_gemm cuts a product over the threads itself). Off (the default), a product pays one load and branch.
#include "kernels/gemm.h"
#include "core/timer.h"
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int ta, tb, kind;
    int64_t M, N, K, calls;
    double s;
} shape_time;

enum { MAX_SHAPES = 512 };
static shape_time shapes[MAX_SHAPES];
static int nshapes, dropped, on;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *kind_name[] = {"fp32", "bf16", "bf16 a rounded", "bf16 b rounded", "bf16 a, b rounded"};

static int by_time(const void *x, const void *y) {
    double a = ((const shape_time *)x)->s, b = ((const shape_time *)y)->s;
    return (a < b) - (a > b);
}

static void report(void) {
    double total = 0;
    for (int i = 0; i < nshapes; i++) total += shapes[i].s;
    qsort(shapes, (size_t)nshapes, sizeof shapes[0], by_time);
    fprintf(stderr, "omnishard: matrix products by shape (OMNISHARD_GEMM_TIMES), %.3f s in all:\n"
                    "  op   M x N x K                     calls  seconds  share  GFLOP/s  operands\n", total);
    for (int i = 0; i < nshapes; i++) {
        const shape_time *e = &shapes[i];
        char dims[64];
        snprintf(dims, sizeof dims, "%lld x %lld x %lld", (long long)e->M, (long long)e->N, (long long)e->K);
        fprintf(stderr, "  %c%c   %-28s %6lld %8.3f %5.1f%% %8.1f  %s\n", e->ta ? 'T' : 'N', e->tb ? 'T' : 'N', dims,
                (long long)e->calls, e->s, total > 0 ? 100 * e->s / total : 0.0,
                2.0 * (double)e->M * (double)e->N * (double)e->K * (double)e->calls / (e->s > 0 ? e->s : 1) * 1e-9,
                kind_name[e->kind]);
    }
    if (dropped) fprintf(stderr, "  (%d products of further shapes not counted)\n", dropped);
}

static void setup(void) {
    on = 1;
    atexit(report);
}

void k_gemm_times_enable(void) { pthread_once(&once, setup); }

double k_gemm_times_start(void) {
    return on && !omp_in_parallel() ? os_now() : 0.0;
}

void k_gemm_times_end(double t0, const k_gemm_op *g, int kind) {
    if (t0 == 0.0) return;
    double s = os_now() - t0;
    for (int i = 0; i < nshapes; i++) {
        shape_time *e = &shapes[i];
        if (e->ta == g->ta && e->tb == g->tb && e->kind == kind && e->M == g->M && e->N == g->N && e->K == g->K) {
            e->calls++, e->s += s;
            return;
        }
    }
    if (nshapes == MAX_SHAPES) {
        dropped++;
        return;
    }
    shapes[nshapes++] = (shape_time){g->ta, g->tb, kind, g->M, g->N, g->K, 1, s};
}
