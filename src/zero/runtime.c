#include "zero/runtime.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/ids.h"
#include "core/timer.h"
#include "kernels/ops.h"
#include "zero/comm.h"
#include "zero/gather_bf16.h"
#include "zero/stage.h"
#include <math.h>
#include <string.h>

// The policies by name (zero/policy.h): the only places the runtime asks what its stage does
static int params_sharded(const zr_runtime *rt) { return rt->pol.params == ZR_PARAMS_SHARDED; }
static int grads_scattered(const zr_runtime *rt) { return rt->pol.grads == ZR_GRADS_REDUCE_SCATTER; }
static int update_sliced(const zr_runtime *rt) { return rt->pol.update == ZR_UPDATE_SLICE; }
// bf16 on and bucket b holds a matrix: the products read it rounded (zero/gather_bf16.h)
static int rounded(const zr_runtime *rt, int b) { return rt->bf16 && rt->bk[b].has_gemm; }

// the span of bucket b this rank holds for `what` (no pointer)
static zr_span part(const zr_runtime *rt, int b, zr_what what) {
    return zr_part_of(&rt->reg->b[b], rt->bk[b].padded, rt->pol, rt->rank, rt->nranks, what);
}

// the buffers of buckets live on the backend's memory (kernels/ops.h): reached through os_k only
static float *floats(int64_t n, const char *what) { return os_k->alloc((int64_t)sizeof(float) * n, what); }
static float *floats_uninit(int64_t n, const char *what) { return os_k->alloc_uninit((int64_t)sizeof(float) * n, what); }

void zr_init(zr_runtime *rt, zr_registry *reg_in, int stage, int rank, int nranks) {
    memset(rt, 0, sizeof *rt);
    zr_registry *reg = os_alloc(sizeof *reg, "parameter registry");
    *reg = *reg_in;
    memset(reg_in, 0, sizeof *reg_in);
    rt->stage = stage, rt->pol = zr_policy_of(stage), rt->rank = rank, rt->nranks = nranks;
    rt->reg = reg, rt->nb = reg->nb;
    rt->bk = os_alloc(sizeof(zr_bucket_state) * (size_t)(reg->nb ? reg->nb : 1), "runtime buckets");
    rt->red_b = -1;
    for (int b = 0; b < reg->nb; b++) {
        zr_bucket_state *k = &rt->bk[b];
        k->padded = zr_padded(reg->b[b].numel, nranks);
        k->slice = k->padded / nranks;
        if (params_sharded(rt)) k->pshard = floats(k->slice, "parameter slice");
        else k->full = floats(k->padded, "parameters");
        if (!reg->b[b].trainable) continue;   // frozen: no gradient buffer, no moments
        if (!grads_scattered(rt)) k->gfull = floats(k->padded, "gradients");   // else: grad_slice, per step
        int64_t n = part(rt, b, ZR_EXP_AVG).n;
        k->m = floats(n, "AdamW m");
        k->v = floats(n, "AdamW v");
    }
}

zr_span zr_local(const zr_runtime *rt, int b, zr_what what) {
    const zr_bucket_state *k = &rt->bk[b];
    zr_span s = part(rt, b, what);
    switch (what) {
    case ZR_PARAMETERS: s.p = params_sharded(rt) ? k->pshard : k->full; break;
    case ZR_GRADIENTS:
        if (s.n) s.p = grads_scattered(rt) ? k->gshard : k->gfull + s.off;
        break;
    case ZR_EXP_AVG: s.p = k->m; break;
    case ZR_EXP_AVG_SQ: s.p = k->v; break;
    }
    return s;
}

// gradients reduce-scattered: the reduced slice of trainable bucket b, allocated when the step first needs it:
// zeros for the optimizer side (zero 1), unspecified for the first reduce-scatter, which writes all of it (zero 0)
static float *grad_slice(zr_runtime *rt, int b, int zero) {
    zr_bucket_state *k = &rt->bk[b];
    if (!k->gshard) k->gshard = zero ? floats(k->slice, "gradient slice") : floats_uninit(k->slice, "gradient slice");
    return k->gshard;
}

// Gradients reduce-scattered: end the reduce-scatter in flight, if any: wait for it (poll 0) or only when it has
// completed (poll 1: advance it without blocking). Its full gradient is dropped; a later micro-batch's result is
// added into the slice (in micro-batch order: one reduction in flight at a time). Time counts as reduce time.
static void reduce_end(zr_runtime *rt, int poll) {
    if (rt->red_b < 0) return;
    double t0 = os_now();
    if (!poll || comm_test(rt->red_req)) {
        comm_wait(rt->red_req);
        int64_t s = rt->bk[rt->red_b].slice;
        float *g = rt->bk[rt->red_b].gshard, *tmp = rt->red_tmp;
        if (tmp) os_k->add(g, g, tmp, s);
        os_k->free(tmp), os_k->free(rt->red_full);
        rt->red_b = -1, rt->red_req = NULL, rt->red_full = rt->red_tmp = NULL;
    }
    rt->times.reduce += os_now() - t0;
}

// Advance the communication in flight without blocking, at the runtime's calls between buckets (Open MPI moves
// non-blocking transfers only inside MPI calls; docs/zero.md "Overlap"): the reduce-scatter, then the prefetches.
static void progress(zr_runtime *rt) {
    reduce_end(rt, 1);
    double t0 = os_now();
    int any = 0;
    for (int b = 0; b < rt->nb; b++)
        if (rt->bk[b].prefetch) comm_test(rt->bk[b].prefetch), comm_test(rt->bk[b].xreq), any = 1;
    if (any) rt->times.gather += os_now() - t0;
}

// this rank's gradient part for the optimizer side (a slice no micro-batch reduced into yet: zeros)
static zr_span local_grads(zr_runtime *rt, int b) {
    reduce_end(rt, 0);
    if (grads_scattered(rt) && rt->reg->b[b].trainable) grad_slice(rt, b, 1);
    return zr_local(rt, b, ZR_GRADIENTS);
}

void zr_free(zr_runtime *rt) {
    reduce_end(rt, 0);
    for (int b = 0; b < rt->nb; b++) {
        zr_bucket_state *k = &rt->bk[b];
        if (k->prefetch) comm_wait(k->prefetch);
        if (k->xreq) comm_wait(k->xreq);
        os_k->free(k->full), os_k->free(k->pshard), os_k->free(k->gfull), os_k->free(k->gshard);
        os_k->free(k->m), os_k->free(k->v), os_k->free(k->rw), os_k->free(k->xbuf);
    }
    if (rt->reg) zr_reg_free(rt->reg);
    os_free(rt->reg), os_free(rt->bk);
    memset(rt, 0, sizeof *rt);
}

int zr_fill(zr_runtime *rt, int b, zr_fill_fn fill, void *ctx) {
    const zr_registry *r = rt->reg;
    zr_span mine = zr_local(rt, b, ZR_PARAMETERS);
    int64_t lo = mine.off, hi = mine.off + mine.n, numel = r->b[b].numel;
    if (hi > numel) os_k->zero(zr_at(mine, numel > lo ? numel : lo), hi - (numel > lo ? numel : lo));
    zr_stage st = {0};
    int rc = 0;
    for (int i = r->b[b].first; rc == 0 && i < r->b[b].first + r->b[b].count; i++) {
        const zr_tensor *p = &r->p[i];
        int64_t s = p->offset > lo ? p->offset : lo, e = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        for (int64_t n; rc == 0 && s < e; s += n) {   // written on the host, a piece at a time
            n = zr_stage_piece(e - s);
            float *dst = zr_at(mine, s), *h = zr_stage_write(&st, dst, n);
            rc = fill(ctx, i, s - p->offset, n, h);
            if (rc == 0) zr_stage_written(&st, dst, h, n);
        }
    }
    zr_stage_free(&st);
    zr_params_changed(rt, b);
    return rc;
}

void zr_params_changed(zr_runtime *rt, int b) { zr_bf16_params_changed(&rt->bk[b]); }

void zr_set_bf16(zr_runtime *rt, int on) {
    for (int b = 0; b < rt->nb; b++) {
        zr_params_changed(rt, b);
        zr_bf16_describe(&rt->bk[b], rt->reg, b, rt->nranks);
    }
    rt->bf16 = on;
}

// ---- gather scopes ----
static void add_live(zr_runtime *rt, int64_t bytes) {
    rt->live_gathered += bytes;
    if (rt->live_gathered > rt->peak_gathered) rt->peak_gathered = rt->live_gathered;
}

// parameters sharded: start gathering bucket b in bf16 (its matrices rounded, zero/gather_bf16.h)
static void start_bf16(zr_runtime *rt, int b) {
    add_live(rt, zr_bf16_gather_start(&rt->bk[b], rt->reg, b, rt->rank, rt->nranks, &rt->gather_bytes));
}

static void finish_bf16(zr_runtime *rt, int b) {
    rt->live_gathered -= zr_bf16_gather_finish(&rt->bk[b], rt->reg, b, rt->nranks);
}

// full[padded] about to receive bucket b's exact fp32 all-gather: this rank's slice copied in, the bytes counted
static void own_slice_in(zr_runtime *rt, int b, float *full) {
    zr_bucket_state *k = &rt->bk[b];
    os_k->copy(full + rt->rank * k->slice, k->pshard, k->slice);
    add_live(rt, 4 * k->padded);
    rt->gather_bytes += (rt->nranks - 1) * 4 * k->slice;
    k->exact = 1;
}

// the gathered buffer: this rank's slice copied in, the all-gather writes the others' (every element is written)
static float *start_gather(zr_runtime *rt, int b) {
    float *full = floats_uninit(rt->bk[b].padded, "gathered bucket");
    own_slice_in(rt, b, full);
    return full;
}

void zr_prefetch(zr_runtime *rt, int b) {
    zr_bucket_state *k = &rt->bk[b];
    if (!params_sharded(rt) || k->full || k->prefetch) return;
    if (rounded(rt, b)) {
        start_bf16(rt, b);
    } else {
        k->full = start_gather(rt, b);
        k->prefetch = comm_iallgather_f32(k->full, k->slice);
    }
    progress(rt);
}

// parameters sharded: bucket b's whole values in k->full (exact: every value in fp32; else, under bf16, the
// matrices may be there only rounded), from its prefetch or a gather now
static void gather_sharded(zr_runtime *rt, int b, int exact) {
    zr_bucket_state *k = &rt->bk[b];
    progress(rt);
    double t0 = os_now();
    if (k->prefetch && k->rw) {
        finish_bf16(rt, b);
    } else if (k->prefetch) {
        comm_wait(k->prefetch);
        k->prefetch = NULL;
    } else if (!k->full && !exact && rounded(rt, b)) {
        start_bf16(rt, b);
        finish_bf16(rt, b);
    } else if (!k->full) {
        k->full = start_gather(rt, b);
        comm_allgather_f32(k->full, k->slice);
    }
    if (exact && !k->exact) {   // gathered in bf16: its fp32 values too (the rounded copy stays)
        own_slice_in(rt, b, k->full);
        comm_allgather_f32(k->full, k->slice);
    }
    rt->times.gather += os_now() - t0;
}

// open a gather scope; exact: every value in fp32 (else, under bf16 with sharded parameters, the matrices only
// rounded)
static float *gather(zr_runtime *rt, int b, int exact) {
    if (params_sharded(rt)) gather_sharded(rt, b, exact);
    else if (rounded(rt, b)) zr_bf16_keep_rounded(&rt->bk[b]);
    rt->bk[b].scope++;
    return rt->bk[b].full;
}

float *zr_gather(zr_runtime *rt, int b) { return gather(rt, b, 1); }
float *zr_gather_compute(zr_runtime *rt, int b) { return gather(rt, b, 0); }

void zr_release(zr_runtime *rt, int b) {
    zr_bucket_state *k = &rt->bk[b];
    OS_ASSERT(k->scope > 0);
    --k->scope;
    if (!params_sharded(rt)) return;
    if (k->scope == 0) {   // the last close drops the gathered bucket
        rt->live_gathered -= zr_bf16_drop(k);
        if (k->exact) rt->live_gathered -= 4 * k->padded;
        os_k->free(k->full);
        k->full = NULL;
        k->exact = 0;
    }
    progress(rt);
}

// ---- gradient scopes ----
float *zr_grad_open(zr_runtime *rt, int b) {
    zr_bucket_state *k = &rt->bk[b];
    if (!rt->reg->b[b].trainable) return NULL;   // frozen: no gradient (every rank alike: no collective)
    // a new gradient buffer only once the previous bucket's reduction has dropped its own (peak memory as if the
    // reduce-scatter blocked at the close)
    if (grads_scattered(rt) && k->gscope == 0) {
        reduce_end(rt, 0);
        k->gfull = floats(k->padded, "gradient bucket");
    }
    k->gscope++;
    return k->gfull;
}

// a bucket trained on [train_lo, train_hi) only: its gradient outside is dropped (the kernels compute all of it)
static void mask_grad(zr_runtime *rt, int b) {
    const zr_bucket *t = &rt->reg->b[b];
    zr_bucket_state *k = &rt->bk[b];
    if (t->train_lo > 0) os_k->zero(k->gfull, t->train_lo);
    if (t->train_hi < k->padded) os_k->zero(k->gfull + t->train_hi, k->padded - t->train_hi);
}

void zr_grad_close(zr_runtime *rt, int b) {
    zr_bucket_state *k = &rt->bk[b];
    if (!rt->reg->b[b].trainable) return;
    OS_ASSERT(k->gscope > 0);
    if (--k->gscope > 0) return;
    mask_grad(rt, b);
    if (!grads_scattered(rt)) return;   // all-reduced once per step (zr_reduce_grads)
    reduce_end(rt, 0);   // one in flight (a tied embedding closes with no open of its own after the layers)
    double t0 = os_now();
    // the step's first reduction of b goes straight into its new slice (0 + x == x); later micro-batches' into a
    // slice of their own, added when it completes
    float *dst = k->gshard ? (rt->red_tmp = floats_uninit(k->slice, "reduce-scatter slice"))
                           : grad_slice(rt, b, 0);
    rt->red_b = b, rt->red_full = k->gfull;
    rt->red_req = comm_ireduce_scatter_sum_f32(k->gfull, dst, k->slice);
    k->gfull = NULL;
    rt->times.reduce += os_now() - t0;
    // one rank: nothing to overlap (the "reduction" is a copy); ending it here keeps the buffers' lifetimes, and
    // so the peak that omnishard plan predicts, exactly as they were
    if (rt->nranks == 1) reduce_end(rt, 0);
}

static _Noreturn void outside(zr_runtime *rt, int pid, const char *what, const char *caller) {
    char d[200];
    os_die("internal error: %s of parameter %s requested by %s() outside its %s scope (ZeRO stage %d, bucket '%s')",
           what, zr_tensor_desc(&rt->reg->p[pid], d, sizeof d), caller, what, rt->stage,
           rt->reg->b[rt->reg->p[pid].bucket].name);
}

static int32_t *ids_up(const int32_t *h, int64_t n) { return os_ids_upload(h, n, "row indexes (backend)"); }

const float *zr_resident(const zr_runtime *rt, int pid) {
    const zr_tensor *p = &rt->reg->p[pid];
    return params_sharded(rt) ? NULL : rt->bk[p->bucket].full + p->offset;
}

// this rank's elements of rows all[0..U) (sorted, distinct) of parameter p into buf[U, C]: the rows wholly inside
// its slice [lo, hi) in one gather, the two rows across its ends (when p has them) by a copy of their part each
// (of no elements when the union has not that row), so the calls are as many whatever the rows
static void slice_rows(const zr_runtime *rt, const zr_tensor *p, const int32_t *all, int64_t U, float *buf) {
    const zr_bucket_state *k = &rt->bk[p->bucket];
    int64_t C = p->shape[1], rows = p->shape[0], lo = rt->rank * k->slice, hi = lo + k->slice;
    int64_t first = lo > p->offset ? (lo - p->offset + C - 1) / C : 0;   // the first row starting inside
    int64_t end = hi > p->offset ? (hi - p->offset) / C : 0;           // rows [first, end) wholly inside
    if (end > rows) end = rows;
    int64_t j0 = 0, j1;
    while (j0 < U && all[j0] < first) j0++;
    for (j1 = j0; j1 < U && all[j1] < end; j1++) {}
    if (j1 > j0) {
        int32_t *idx = os_alloc(sizeof(int32_t) * (size_t)(j1 - j0), "row indexes");
        for (int64_t j = j0; j < j1; j++) idx[j - j0] = (int32_t)(all[j] - first);
        int32_t *d = ids_up(idx, j1 - j0);
        os_k->gather_rows(buf + j0 * C, k->pshard + (p->offset + first * C - lo), d, j1 - j0, C);
        os_k->free(d), os_free(idx);
    }
    // the rows across the slice's ends: first - 1 (begins before lo) and end (ends after hi)
    int64_t across[2] = {first - 1, end};
    for (int e = 0; e < 2; e++) {
        int64_t r = across[e], e0 = p->offset + r * C;
        if (r < 0 || r >= rows || e0 >= hi || e0 + C <= lo) continue;   // p has no row across this end
        int64_t s = e0 > lo ? e0 : lo, t = e0 + C < hi ? e0 + C : hi, j = os_ids_find(all, U, (int32_t)r);
        if (j < 0) s = t;   // not wanted: a copy of nothing keeps the calls the same
        os_k->copy(buf + (j < 0 ? 0 : j * C) + (s - e0), k->pshard + (s - lo), t - s);
    }
}

void zr_read_rows(zr_runtime *rt, int pid, const int32_t *ids, int64_t n, float *out) {
    const zr_tensor *p = &rt->reg->p[pid];
    const zr_bucket_state *k = &rt->bk[p->bucket];
    int64_t C = p->shape[1];
    if (!params_sharded(rt)) {   // replicated: one gather of the rows
        int32_t *d = ids_up(ids, n);
        os_k->gather_rows(out, k->full + p->offset, d, n, C);
        os_k->free(d);
        return;
    }
    double t0 = os_now();
    int N = rt->nranks;
    int64_t *cnt = os_alloc(sizeof(int64_t) * (size_t)N, "row counts"), most = 1, U = 0;
    comm_allgather_bytes(&n, cnt, sizeof n);
    for (int r = 0; r < N; r++) most = cnt[r] > most ? cnt[r] : most;
    int32_t *mine = os_alloc(sizeof(int32_t) * (size_t)most, "row ids"), *all = os_alloc(sizeof(int32_t) * (size_t)(N * most), "row ids");
    memcpy(mine, ids, sizeof(int32_t) * (size_t)n);
    comm_allgather_bytes(mine, all, (int64_t)sizeof(int32_t) * most);
    for (int r = 0; r < N; r++)   // the union of the ranks' lists
        for (int64_t i = 0; i < cnt[r]; i++) all[U++] = all[r * most + i];
    U = os_ids_unique(all, U);
    float *buf = floats(U * C, "gathered rows");
    slice_rows(rt, p, all, U, buf);
    comm_allreduce_sum_f32(buf, U * C);
    for (int64_t i = 0; i < n; i++) mine[i] = (int32_t)os_ids_find(all, U, ids[i]);   // this rank's rows in buf
    int32_t *d = ids_up(mine, n);
    os_k->gather_rows(out, buf, d, n, C);
    os_free(cnt), os_free(mine), os_free(all), os_k->free(buf), os_k->free(d);
    rt->times.gather += os_now() - t0;
}

float *zr_param_at(zr_runtime *rt, int pid, const char *caller) {
    const zr_tensor *p = &rt->reg->p[pid];
    const zr_bucket_state *k = &rt->bk[p->bucket];
    if (k->scope <= 0 || !k->full) outside(rt, pid, "data", caller);
    return k->full + p->offset;
}

os_tensor zr_tensor_at(zr_runtime *rt, int pid, const char *caller) {
    const zr_tensor *p = &rt->reg->p[pid];
    const float *f = zr_param_at(rt, pid, caller);
    const uint16_t *r = p->gemm ? zr_bf16_rounded(&rt->bk[p->bucket], params_sharded(rt)) : NULL;
    const void *d = r ? (const void *)(r + p->offset) : f;
    os_dtype t = r ? OS_BF16 : OS_F32;
    if (p->ndim < 2) return os_vec(d, t, p->numel);
    int64_t rows = p->shape[0], cols = rows ? p->numel / rows : 0;
    return os_mat(d, t, rows, cols, cols);
}

float *zr_grad_at(zr_runtime *rt, int pid, const char *caller) {
    const zr_tensor *p = &rt->reg->p[pid];
    const zr_bucket_state *k = &rt->bk[p->bucket];
    if (!rt->reg->b[p->bucket].trainable) return NULL;
    if (k->gscope <= 0 || !k->gfull) outside(rt, pid, "gradient", caller);
    return k->gfull + p->offset;
}

// ---- optimizer side ----
void zr_reduce_grads(zr_runtime *rt) {
    if (grads_scattered(rt)) return reduce_end(rt, 0);   // reduced at each scope close: the last one completes
    double t0 = os_now();
    for (int b = 0; b < rt->nb; b++)
        if (rt->bk[b].gfull) comm_allreduce_sum_f32(rt->bk[b].gfull, rt->bk[b].padded);
    rt->times.reduce += os_now() - t0;
}

double zr_grad_norm(zr_runtime *rt, double *per_bucket) {
    double t0 = os_now();
    double *ds = os_k->alloc((int64_t)sizeof(double) * rt->nb, "grad norms"), tot = 0.0;
    double *ss = os_alloc(sizeof(double) * (size_t)rt->nb, "grad norms (host)");
    for (int b = 0; b < rt->nb; b++) {
        if (!rt->reg->b[b].trainable) continue;
        zr_span g = local_grads(rt, b);
        os_k->sumsq(g.p, g.n, &ds[b]);   // vectorised (the scalar loop took 2% of a bf16 step)
    }
    os_k->download(ss, ds, (int64_t)sizeof(double) * rt->nb);   // the optimizer step's wait for the backward
    os_k->free(ds);
    if (update_sliced(rt)) comm_allreduce_sum_f64(ss, rt->nb);   // each rank summed its slice
    for (int b = 0; b < rt->nb; b++) {
        tot += ss[b];
        if (per_bucket) per_bucket[b] = sqrt(ss[b]);
    }
    os_free(ss);
    rt->times.optim += os_now() - t0;
    return sqrt(tot);
}

void zr_adamw_step(zr_runtime *rt, float lr, float b1, float b2, float eps, float wd, float gscale, int64_t step) {
    const zr_registry *r = rt->reg;
    double t0 = os_now(), tg = 0.0;
    for (int b = 0; b < rt->nb; b++) {
        if (!r->b[b].trainable) continue;
        zr_bucket_state *k = &rt->bk[b];
        zr_span g = local_grads(rt, b), p = zr_local(rt, b, ZR_PARAMETERS);
        zr_span m = zr_local(rt, b, ZR_EXP_AVG), v = zr_local(rt, b, ZR_EXP_AVG_SQ);
        int64_t lo = m.off, hi = m.off + m.n;   // the moments: this rank's part of the trained range
        // walk the parameters overlapping [lo, hi) so weight decay follows each tensor's rule; AdamW zeroes the
        // gradient it reads
        int64_t done = g.off;   // the gradient's elements before `done` are zero
        for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++) {
            const zr_tensor *q = &r->p[i];
            int64_t s = q->offset > lo ? q->offset : lo;
            int64_t e = q->offset + q->numel < hi ? q->offset + q->numel : hi;
            if (s >= e) continue;
            if (s > done) os_k->zero(zr_at(g, done), s - done);
            os_k->adamw(zr_at(p, s), zr_at(g, s), zr_at(m, s), zr_at(v, s), e - s, lr, b1, b2, eps,
                     q->ndim >= 2 ? wd : 0.0f, gscale, step);
            done = e > done ? e : done;
        }
        if (grads_scattered(rt)) {   // the slice lives until the next step's first reduction of b
            os_k->free(k->gshard);
            k->gshard = NULL;
        } else {   // the kept full gradient zeroed for the next step: what AdamW did not read (untrained ranges,
                   // padding) and, updated by slice, the other ranks' slices
            os_k->zero(k->gfull, g.off);
            os_k->zero(k->gfull + done, k->padded - done);
        }
        if (rt->pol.gather_after_update) {   // the whole parameters again on every rank
            double t1 = os_now();
            comm_allgather_f32(k->full, k->slice);
            rt->gather_bytes += (rt->nranks - 1) * 4 * k->slice;
            tg += os_now() - t1;
        }
        zr_params_changed(rt, b);
    }
    rt->times.gather += tg;
    rt->times.optim += os_now() - t0 - tg;
}

int zr_first_nonfinite(zr_runtime *rt, int grads) {
    const zr_registry *r = rt->reg;
    int64_t first = r->np, *dj = os_k->alloc((int64_t)sizeof(int64_t) * rt->nb, "non-finite checks");
    int64_t *j = os_alloc(sizeof(int64_t) * (size_t)rt->nb, "non-finite checks (host)");
    int64_t *off = os_alloc(sizeof(int64_t) * (size_t)rt->nb, "non-finite checks (host)");
    for (int b = 0; b < rt->nb; b++) {   // each bucket's first non-finite element on the backend, then one read
        if (!r->b[b].trainable) continue;
        zr_span g = local_grads(rt, b);
        off[b] = g.off;
        os_k->first_nonfinite(grads ? g.p : zr_at(zr_local(rt, b, ZR_PARAMETERS), g.off), g.n, &dj[b]);
    }
    os_k->download(j, dj, (int64_t)sizeof(int64_t) * rt->nb);
    os_k->free(dj);
    for (int b = 0; b < rt->nb && first == r->np; b++) {
        if (!r->b[b].trainable || j[b] < 0) continue;
        for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++)
            if (off[b] + j[b] >= r->p[i].offset && off[b] + j[b] < r->p[i].offset + r->p[i].numel) first = i;
    }
    os_free(j), os_free(off);
    comm_allreduce_min_i64(&first, 1);
    return first < r->np ? (int)first : -1;
}

int64_t zr_model_state_bytes(const zr_runtime *rt) {
    int64_t t = 0;
    for (int b = 0; b < rt->nb; b++) {
        const zr_bucket_state *k = &rt->bk[b];
        t += 4 * part(rt, b, ZR_PARAMETERS).n;
        if (!rt->reg->b[b].trainable) continue;
        t += 4 * (grads_scattered(rt) ? k->slice : k->padded) + 8 * part(rt, b, ZR_EXP_AVG).n;
    }
    return t;
}

void zr_read_bucket(zr_runtime *rt, int b, float *out) {
    const float *full = zr_gather(rt, b);
    os_k->download(out, full, (int64_t)sizeof(float) * rt->reg->b[b].numel);
    zr_release(rt, b);
}

void zr_read_grads(zr_runtime *rt, int b, float *out) {
    const zr_bucket_state *k = &rt->bk[b];
    zr_span g = local_grads(rt, b);
    if (!grads_scattered(rt)) {   // the full reduced gradient is on every rank
        os_k->download(out, k->gfull, (int64_t)sizeof(float) * rt->reg->b[b].numel);
        return;
    }
    float *all = floats_uninit(k->padded, "gradient bucket");   // slice + all-gather: whole
    os_k->copy(all + g.off, g.p, g.n);
    comm_allgather_f32(all, g.n);
    os_k->download(out, all, (int64_t)sizeof(float) * rt->reg->b[b].numel);
    os_k->free(all);
}
