#include "zero/gather_bf16.h"
#include "kernels/ops.h"
#include "zero/comm.h"
#include <stddef.h>

// The fp32-tensor elements (zr_tensor.gemm 0) of rank q's slice of bucket b (slices of S), in registry order:
// packed from slice (the slice's values) into buf, or (slice NULL, full not) unpacked from buf into full; returns
// their count.
static int64_t extras(const zr_registry *r, int b, int64_t S, int q, const float *slice, float *buf, float *full) {
    int64_t lo = q * S, hi = lo + S, n = 0;
    for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++) {
        const zr_tensor *p = &r->p[i];
        int64_t s = p->offset > lo ? p->offset : lo, e = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (p->gemm || s >= e) continue;
        if (slice) os_k->copy(buf + n, slice + (s - lo), e - s);
        else if (full) os_k->copy(full + s, buf + n, e - s);
        n += e - s;
    }
    return n;
}

void zr_bf16_describe(zr_bucket_state *k, const zr_registry *r, int b, int nranks) {
    k->has_gemm = 0;
    for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++) k->has_gemm |= r->p[i].gemm != 0;
    k->nx = 0;
    for (int q = 0; q < nranks; q++) {
        int64_t n = extras(r, b, k->slice, q, NULL, NULL, NULL);
        k->nx = n > k->nx ? n : k->nx;
    }
}

void zr_bf16_params_changed(zr_bucket_state *k) { k->stale = 1; }

void zr_bf16_keep_rounded(zr_bucket_state *k) {
    if (!k->stale) return;
    int64_t n = k->padded;
    if (!k->rw) k->rw = os_k->alloc(2 * n, "bf16-rounded parameters");
    os_k->cast(os_vec(k->rw, OS_BF16, n), os_vecf(k->full, n));
    k->stale = 0;
}

const uint16_t *zr_bf16_rounded(const zr_bucket_state *k, int sharded) {
    return k->rw && (sharded || !k->stale) ? k->rw : NULL;
}

// every slice rounded (bf16 pairs moved as floats, never computed on) into rw, and the fp32 tensors' elements of
// every slice (nx per rank, zero-padded) exactly; full receives only those (its pages under the matrices are never
// touched: os_k->alloc_sparse: on the CPU they take no memory)
int64_t zr_bf16_gather_start(zr_bucket_state *k, const zr_registry *r, int b, int rank, int nranks,
                             int64_t *received) {
    int64_t S = k->slice, n = k->padded, x = k->nx;
    k->full = os_k->alloc_sparse((int64_t)sizeof(float) * n, "gathered bucket (its fp32 tensors)");
    k->rw = os_k->alloc(2 * n, "gathered bucket in bf16");
    os_k->cast(os_vec(k->rw + rank * S, OS_BF16, S), os_vecf(k->pshard, S));
    k->prefetch = comm_iallgather_f32((float *)k->rw, S / 2);   // S is a multiple of 16
    if (x) {
        k->xbuf = os_k->alloc((int64_t)sizeof(float) * nranks * x, "gathered fp32 tensors");
        extras(r, b, S, rank, k->pshard, k->xbuf + rank * x, NULL);
        k->xreq = comm_iallgather_f32(k->xbuf, x);
    }
    k->exact = 0;
    *received += (nranks - 1) * (2 * S + 4 * x);
    return 2 * n + 4 * nranks * x;
}

int64_t zr_bf16_gather_finish(zr_bucket_state *k, const zr_registry *r, int b, int nranks) {
    comm_wait(k->prefetch);
    k->prefetch = NULL;
    int64_t x = k->nx, freed = 0;
    if (k->xreq) {
        comm_wait(k->xreq);
        k->xreq = NULL;
        for (int q = 0; q < nranks; q++) extras(r, b, k->slice, q, NULL, k->xbuf + q * x, k->full);
        os_k->free(k->xbuf);
        k->xbuf = NULL;
        freed = 4 * nranks * x;
    }
    return freed;
}

int64_t zr_bf16_drop(zr_bucket_state *k) {
    if (!k->rw) return 0;
    os_k->free(k->rw);
    k->rw = NULL;
    return 2 * k->padded;
}
