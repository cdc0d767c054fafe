#include "zero/runtime.h"
#include "kernels/kernels.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/ids.h"
#include "core/timer.h"
#include "kernels/ops.h"
#include "zero/comm.h"
#include <math.h>
#include <string.h>

#define PAD_UNIT 16

static void *arr(int n, size_t es) { return os_alloc((size_t)(n ? n : 1) * es, "runtime tables"); }

int64_t zr_padded(int64_t numel, int nranks) {
    int64_t unit = (int64_t)PAD_UNIT * nranks;
    return (numel + unit - 1) / unit * unit;
}

zr_span zr_part(const zr_bucket *k, int64_t padded, int stage, int rank, int nranks, zr_what what) {
    int64_t S = padded / nranks;
    if (what == ZR_PARAMETERS) return stage == 3 ? (zr_span){NULL, rank * S, S} : (zr_span){NULL, 0, padded};
    if (!k->trainable) return (zr_span){NULL, 0, 0};
    // the part the rank reduces and updates: the whole at stage 0, its slice otherwise
    zr_span s = stage == 0 ? (zr_span){NULL, 0, padded} : (zr_span){NULL, rank * S, S};
    if (what == ZR_GRADIENTS) return s;
    int64_t a = s.off, e = s.off + s.n;   // the moments: that part within the trained range
    if (a < k->train_lo) a = k->train_lo;
    if (e > k->train_hi) e = k->train_hi;
    if (e < a) e = a;
    return (zr_span){NULL, a, e - a};
}

// the span of bucket b this rank holds for `what` (no pointer)
static zr_span part(const zr_runtime *rt, int b, zr_what what) {
    return zr_part(&rt->reg->b[b], rt->padded[b], rt->stage, rt->rank, rt->nranks, what);
}

void zr_init(zr_runtime *rt, zr_registry *reg_in, int stage, int rank, int nranks) {
    memset(rt, 0, sizeof *rt);
    zr_registry *reg = os_alloc(sizeof *reg, "parameter registry");
    *reg = *reg_in;
    memset(reg_in, 0, sizeof *reg_in);
    rt->stage = stage, rt->rank = rank, rt->nranks = nranks, rt->reg = reg, rt->nb = reg->nb;
    int nb = reg->nb;
    rt->padded = arr(nb, 8), rt->slice = arr(nb, 8);
    rt->full = arr(nb, 8), rt->pshard = arr(nb, 8), rt->gfull = arr(nb, 8), rt->gshard = arr(nb, 8);
    rt->m = arr(nb, 8), rt->v = arr(nb, 8);
    rt->scope = arr(nb, sizeof(int)), rt->gscope = arr(nb, sizeof(int)), rt->prefetch = arr(nb, 8);
    rt->red_b = -1;
    rt->has_gemm = arr(nb, 1), rt->rw = arr(nb, 8), rt->stale = arr(nb, 1), rt->exact = arr(nb, 1);
    rt->nx = arr(nb, 8), rt->xbuf = arr(nb, 8), rt->xreq = arr(nb, 8);
    for (int b = 0; b < nb; b++) {
        int64_t np = zr_padded(reg->b[b].numel, nranks);
        rt->padded[b] = np;
        rt->slice[b] = np / nranks;
        if (stage < 3) rt->full[b] = os_alloc(sizeof(float) * (size_t)np, "parameters");
        else rt->pshard[b] = os_alloc(sizeof(float) * (size_t)rt->slice[b], "parameter slice");
        if (!reg->b[b].trainable) continue;   // frozen: no gradient buffer, no moments
        if (stage < 2) rt->gfull[b] = os_alloc(sizeof(float) * (size_t)np, "gradients");   // stage 2/3: grad_slice
        int64_t n = part(rt, b, ZR_EXP_AVG).n;
        rt->m[b] = os_alloc(sizeof(float) * (size_t)n, "AdamW m");
        rt->v[b] = os_alloc(sizeof(float) * (size_t)n, "AdamW v");
    }
}

zr_span zr_local(const zr_runtime *rt, int b, zr_what what) {
    zr_span s = part(rt, b, what);
    switch (what) {
    case ZR_PARAMETERS: s.p = rt->stage == 3 ? rt->pshard[b] : rt->full[b]; break;
    case ZR_GRADIENTS:
        if (s.n) s.p = rt->stage >= 2 ? rt->gshard[b] : rt->gfull[b] + s.off;
        break;
    case ZR_EXP_AVG: s.p = rt->m[b]; break;
    case ZR_EXP_AVG_SQ: s.p = rt->v[b]; break;
    }
    return s;
}

// stage 2/3: the reduced gradient slice of trainable bucket b, allocated when the step first needs it: zeros for
// the optimizer side (zero 1), unspecified for the first reduce-scatter, which writes all of it (zero 0)
static float *grad_slice(zr_runtime *rt, int b, int zero) {
    size_t bytes = sizeof(float) * (size_t)rt->slice[b];
    if (!rt->gshard[b]) rt->gshard[b] = zero ? os_alloc(bytes, "gradient slice") : os_alloc_uninit(bytes, "gradient slice");
    return rt->gshard[b];
}

// Stage 2/3: end the gradient reduce-scatter in flight, if any: wait for it (poll 0) or only when it has
// completed (poll 1: advance it without blocking). Its full gradient is dropped; a later micro-batch's result is
// added into the slice (in micro-batch order: one reduction in flight at a time). Time counts as reduce time.
static void reduce_end(zr_runtime *rt, int poll) {
    if (rt->red_b < 0) return;
    double t0 = os_now();
    if (!poll || comm_test(rt->red_req)) {
        comm_wait(rt->red_req);
        int64_t s = rt->slice[rt->red_b];
        float *g = rt->gshard[rt->red_b], *tmp = rt->red_tmp;
        for (int64_t i = 0; tmp && i < s; i++) g[i] += tmp[i];
        os_free(tmp), os_free(rt->red_full);
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
        if (rt->prefetch[b]) comm_test(rt->prefetch[b]), comm_test(rt->xreq[b]), any = 1;
    if (any) rt->times.gather += os_now() - t0;
}

// this rank's gradient part for the optimizer side (a slice no micro-batch reduced into yet: zeros)
static zr_span local_grads(zr_runtime *rt, int b) {
    reduce_end(rt, 0);
    if (rt->stage >= 2 && rt->reg->b[b].trainable) grad_slice(rt, b, 1);
    return zr_local(rt, b, ZR_GRADIENTS);
}

void zr_free(zr_runtime *rt) {
    reduce_end(rt, 0);
    for (int b = 0; b < rt->nb; b++) {
        if (rt->prefetch[b]) comm_wait(rt->prefetch[b]);
        if (rt->xreq[b]) comm_wait(rt->xreq[b]);
        if (rt->rw[b]) os_k->gemm_unbind(rt->full[b]);
        os_free(rt->full[b]), os_free(rt->pshard[b]), os_free(rt->gfull[b]), os_free(rt->gshard[b]);
        os_free(rt->m[b]), os_free(rt->v[b]), os_free(rt->rw[b]), os_free(rt->xbuf[b]);
    }
    zr_registry *reg = rt->reg;
    if (reg) zr_reg_free(reg);
    void *t[] = {reg, rt->padded, rt->slice, rt->full, rt->pshard, rt->gfull, rt->gshard, rt->m, rt->v, rt->scope,
                 rt->gscope, rt->prefetch, rt->has_gemm, rt->rw, rt->stale, rt->exact, rt->nx, rt->xbuf, rt->xreq};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) os_free(t[i]);
    memset(rt, 0, sizeof *rt);
}

int zr_fill(zr_runtime *rt, int b, zr_fill_fn fill, void *ctx) {
    const zr_registry *r = rt->reg;
    zr_span mine = zr_local(rt, b, ZR_PARAMETERS);
    int64_t lo = mine.off, hi = mine.off + mine.n, numel = r->b[b].numel;
    if (hi > numel) memset(zr_at(mine, numel > lo ? numel : lo), 0, sizeof(float) * (size_t)(hi - (numel > lo ? numel : lo)));
    for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++) {
        const zr_tensor *p = &r->p[i];
        int64_t s = p->offset > lo ? p->offset : lo, e = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (s >= e) continue;
        int rc = fill(ctx, i, s - p->offset, e - s, zr_at(mine, s));
        if (rc) return rc;
    }
    zr_params_changed(rt, b);
    return 0;
}

// ---- bf16 (docs/zero.md "bf16") ----
// The fp32-tensor elements (zr_tensor.gemm 0) of rank q's slice of bucket b, in registry order: packed from slice
// (the slice's values) into buf, or (slice NULL, full not) unpacked from buf into full; returns their count.
static int64_t extras(const zr_runtime *rt, int b, int q, const float *slice, float *buf, float *full) {
    const zr_registry *r = rt->reg;
    int64_t lo = q * rt->slice[b], hi = lo + rt->slice[b], n = 0;
    for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++) {
        const zr_tensor *p = &r->p[i];
        int64_t s = p->offset > lo ? p->offset : lo, e = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (p->gemm || s >= e) continue;
        if (slice) memcpy(buf + n, slice + (s - lo), sizeof(float) * (size_t)(e - s));
        else if (full) memcpy(full + s, buf + n, sizeof(float) * (size_t)(e - s));
        n += e - s;
    }
    return n;
}

void zr_params_changed(zr_runtime *rt, int b) {
    if (rt->stage < 3 && rt->rw[b] && !rt->stale[b]) os_k->gemm_unbind(rt->full[b]);
    rt->stale[b] = 1;
}

void zr_set_bf16(zr_runtime *rt, int on) {
    const zr_registry *r = rt->reg;
    for (int b = 0; b < rt->nb; b++) {
        zr_params_changed(rt, b);
        rt->has_gemm[b] = 0;
        for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++) rt->has_gemm[b] |= r->p[i].gemm != 0;
        rt->nx[b] = 0;
        for (int q = 0; q < rt->nranks; q++) {
            int64_t n = extras(rt, b, q, NULL, NULL, NULL);
            rt->nx[b] = n > rt->nx[b] ? n : rt->nx[b];
        }
    }
    rt->bf16 = on;
}

static void add_live(zr_runtime *rt, int64_t bytes) {
    rt->live_gathered += bytes;
    if (rt->live_gathered > rt->peak_gathered) rt->peak_gathered = rt->live_gathered;
}

// stage 0-2: bucket b's rounded copy up to date and bound (bf16, a bucket with a matrix)
static void keep_rounded(zr_runtime *rt, int b) {
    if (!rt->bf16 || !rt->has_gemm[b] || !rt->stale[b]) return;
    int64_t n = rt->padded[b];
    if (!rt->rw[b]) rt->rw[b] = os_alloc((size_t)(os_k->gemm_bound_esz() * n), "bf16-rounded parameters");
    os_k->to_bf16(rt->rw[b], rt->full[b], n);
    os_k->gemm_widen(rt->rw[b], n);
    os_k->gemm_bind(rt->full[b], n, rt->rw[b]);
    rt->stale[b] = 0;
}

// stage 3: start the all-gather of bucket b in bf16: every slice rounded (bf16 pairs moved as floats, never
// computed on) into rw[b], and the fp32 tensors' elements of every slice (nx[b] per rank, zero-padded) exactly;
// full[b] receives only those (its pages under the matrices are never touched: os_alloc_lazy, they take no memory)
static void start_bf16(zr_runtime *rt, int b) {
    int N = rt->nranks;
    int64_t S = rt->slice[b], n = rt->padded[b], x = rt->nx[b], esz = os_k->gemm_bound_esz();
    rt->full[b] = os_alloc_lazy(sizeof(float) * (size_t)n, "gathered bucket (its fp32 tensors)");
    rt->rw[b] = os_alloc((size_t)(esz * n), "gathered bucket in bf16");
    os_k->to_bf16((uint16_t *)rt->rw[b] + rt->rank * S, rt->pshard[b], S);
    rt->prefetch[b] = comm_iallgather_f32(rt->rw[b], S / 2);   // S is a multiple of 16
    if (x) {
        rt->xbuf[b] = os_alloc(sizeof(float) * (size_t)(N * x), "gathered fp32 tensors");
        extras(rt, b, rt->rank, rt->pshard[b], rt->xbuf[b] + rt->rank * x, NULL);
        rt->xreq[b] = comm_iallgather_f32(rt->xbuf[b], x);
    }
    rt->exact[b] = 0;
    add_live(rt, esz * n + 4 * N * x);
    rt->gather_bytes += (N - 1) * (2 * S + 4 * x);
}

static void finish_bf16(zr_runtime *rt, int b) {
    comm_wait(rt->prefetch[b]);
    rt->prefetch[b] = NULL;
    int64_t x = rt->nx[b], n = rt->padded[b];
    if (rt->xreq[b]) {
        comm_wait(rt->xreq[b]);
        rt->xreq[b] = NULL;
        for (int q = 0; q < rt->nranks; q++) extras(rt, b, q, NULL, rt->xbuf[b] + q * x, rt->full[b]);
        os_free(rt->xbuf[b]);
        rt->xbuf[b] = NULL;
        rt->live_gathered -= 4 * rt->nranks * x;
    }
    os_k->gemm_widen(rt->rw[b], n);
    os_k->gemm_bind(rt->full[b], n, rt->rw[b]);
}

// full[padded] about to receive bucket b's exact fp32 all-gather: this rank's slice copied in, the bytes counted
static void own_slice_in(zr_runtime *rt, int b, float *full) {
    memcpy(full + rt->rank * rt->slice[b], rt->pshard[b], sizeof(float) * (size_t)rt->slice[b]);
    add_live(rt, 4 * rt->padded[b]);
    rt->gather_bytes += (rt->nranks - 1) * 4 * rt->slice[b];
    rt->exact[b] = 1;
}

// the gathered buffer: this rank's slice copied in, the all-gather writes the others' (every element is written)
static float *start_gather(zr_runtime *rt, int b) {
    float *full = os_alloc_uninit(sizeof(float) * (size_t)rt->padded[b], "gathered bucket");
    own_slice_in(rt, b, full);
    return full;
}

// stage 3, bf16: bucket b is gathered in bf16
static int bf16_gathered(const zr_runtime *rt, int b) { return rt->bf16 && rt->has_gemm[b]; }

void zr_prefetch(zr_runtime *rt, int b) {
    if (rt->stage < 3 || rt->full[b] || rt->prefetch[b]) return;
    if (bf16_gathered(rt, b)) {
        start_bf16(rt, b);
    } else {
        rt->full[b] = start_gather(rt, b);
        rt->prefetch[b] = comm_iallgather_f32(rt->full[b], rt->slice[b]);
    }
    progress(rt);
}

// open a gather scope; exact: every value in fp32 (else, under bf16 at stage 3, the matrices only rounded)
static float *gather(zr_runtime *rt, int b, int exact) {
    if (rt->stage < 3) keep_rounded(rt, b);
    if (rt->stage == 3) {
        progress(rt);
        double t0 = os_now();
        if (rt->prefetch[b] && rt->rw[b]) {
            finish_bf16(rt, b);
        } else if (rt->prefetch[b]) {
            comm_wait(rt->prefetch[b]);
            rt->prefetch[b] = NULL;
        } else if (!rt->full[b] && !exact && bf16_gathered(rt, b)) {
            start_bf16(rt, b);
            finish_bf16(rt, b);
        } else if (!rt->full[b]) {
            rt->full[b] = start_gather(rt, b);
            comm_allgather_f32(rt->full[b], rt->slice[b]);
        }
        if (exact && !rt->exact[b]) {   // gathered in bf16: its fp32 values too (the rounded copy stays bound)
            own_slice_in(rt, b, rt->full[b]);
            comm_allgather_f32(rt->full[b], rt->slice[b]);
        }
        rt->times.gather += os_now() - t0;
    }
    rt->scope[b]++;
    return rt->full[b];
}

float *zr_gather(zr_runtime *rt, int b) { return gather(rt, b, 1); }
float *zr_gather_compute(zr_runtime *rt, int b) { return gather(rt, b, 0); }

void zr_release(zr_runtime *rt, int b) {
    OS_ASSERT(rt->scope[b] > 0);
    if (--rt->scope[b] == 0 && rt->stage == 3) {
        if (rt->rw[b]) {
            os_k->gemm_unbind(rt->full[b]);
            os_free(rt->rw[b]);
            rt->rw[b] = NULL;
            rt->live_gathered -= os_k->gemm_bound_esz() * rt->padded[b];
        }
        if (rt->exact[b]) rt->live_gathered -= 4 * rt->padded[b];
        os_free(rt->full[b]);
        rt->full[b] = NULL;
        rt->exact[b] = 0;
    }
    if (rt->stage == 3) progress(rt);
}

float *zr_grad_open(zr_runtime *rt, int b) {
    if (!rt->reg->b[b].trainable) return NULL;   // frozen: no gradient (every rank alike: no collective)
    // a new gradient buffer only once the previous bucket's reduction has dropped its own (peak memory as if the
    // reduce-scatter blocked at the close)
    if (rt->stage >= 2 && rt->gscope[b] == 0) {
        reduce_end(rt, 0);
        rt->gfull[b] = os_alloc(sizeof(float) * (size_t)rt->padded[b], "gradient bucket");
    }
    rt->gscope[b]++;
    return rt->gfull[b];
}

// a bucket trained on [train_lo, train_hi) only: its gradient outside is dropped (the kernels compute all of it)
static void mask_grad(zr_runtime *rt, int b) {
    const zr_bucket *k = &rt->reg->b[b];
    float *g = rt->gfull[b];
    if (k->train_lo > 0) memset(g, 0, sizeof(float) * (size_t)k->train_lo);
    if (k->train_hi < rt->padded[b]) memset(g + k->train_hi, 0, sizeof(float) * (size_t)(rt->padded[b] - k->train_hi));
}

void zr_grad_close(zr_runtime *rt, int b) {
    if (!rt->reg->b[b].trainable) return;
    OS_ASSERT(rt->gscope[b] > 0);
    if (--rt->gscope[b] > 0) return;
    mask_grad(rt, b);
    if (rt->stage < 2) return;
    reduce_end(rt, 0);   // one in flight (a tied embedding closes with no open of its own after the layers)
    double t0 = os_now();
    int64_t s = rt->slice[b];
    // the step's first reduction of b goes straight into its new slice (0 + x == x); later micro-batches' into a
    // slice of their own, added when it completes
    float *dst = rt->gshard[b] ? (rt->red_tmp = os_alloc_uninit(sizeof(float) * (size_t)s, "reduce-scatter slice")) : grad_slice(rt, b, 0);
    rt->red_b = b, rt->red_full = rt->gfull[b];
    rt->red_req = comm_ireduce_scatter_sum_f32(rt->gfull[b], dst, s);
    rt->gfull[b] = NULL;
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

void zr_read_rows(zr_runtime *rt, int pid, const int32_t *ids, int64_t n, float *out) {
    const zr_tensor *p = &rt->reg->p[pid];
    int b = p->bucket;
    int64_t C = p->shape[1];
    if (rt->stage < 3) {
        for (int64_t i = 0; i < n; i++) memcpy(out + i * C, rt->full[b] + p->offset + ids[i] * C, sizeof(float) * (size_t)C);
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
    float *buf = os_alloc(sizeof(float) * (size_t)(U * C), "gathered rows");
    int64_t lo = rt->rank * rt->slice[b], hi = lo + rt->slice[b];
    for (int64_t j = 0; j < U; j++) {   // this rank's elements of each row: the part inside its slice
        int64_t e0 = p->offset + all[j] * C, s = e0 > lo ? e0 : lo, e = e0 + C < hi ? e0 + C : hi;
        if (s < e) memcpy(buf + j * C + (s - e0), rt->pshard[b] + (s - lo), sizeof(float) * (size_t)(e - s));
    }
    comm_allreduce_sum_f32(buf, U * C);
    for (int64_t i = 0; i < n; i++)
        memcpy(out + i * C, buf + os_ids_find(all, U, ids[i]) * C, sizeof(float) * (size_t)C);
    os_free(cnt), os_free(mine), os_free(all), os_free(buf);
    rt->times.gather += os_now() - t0;
}

float *zr_param_at(zr_runtime *rt, int pid, const char *caller) {
    const zr_tensor *p = &rt->reg->p[pid];
    if (rt->scope[p->bucket] <= 0 || !rt->full[p->bucket]) outside(rt, pid, "data", caller);
    return rt->full[p->bucket] + p->offset;
}

float *zr_grad_at(zr_runtime *rt, int pid, const char *caller) {
    const zr_tensor *p = &rt->reg->p[pid];
    if (!rt->reg->b[p->bucket].trainable) return NULL;
    if (rt->gscope[p->bucket] <= 0 || !rt->gfull[p->bucket]) outside(rt, pid, "gradient", caller);
    return rt->gfull[p->bucket] + p->offset;
}

void zr_reduce_grads(zr_runtime *rt) {
    if (rt->stage >= 2) return reduce_end(rt, 0);
    double t0 = os_now();
    for (int b = 0; b < rt->nb; b++)
        if (rt->gfull[b]) comm_allreduce_sum_f32(rt->gfull[b], rt->padded[b]);
    rt->times.reduce += os_now() - t0;
}

double zr_grad_norm(zr_runtime *rt, double *per_bucket) {
    double t0 = os_now();
    double *ss = os_alloc(sizeof(double) * (size_t)rt->nb, "grad norms"), tot = 0.0;
    for (int b = 0; b < rt->nb; b++) {
        if (!rt->reg->b[b].trainable) continue;
        zr_span g = local_grads(rt, b);
        ss[b] = os_k->sumsq(g.p, g.n);   // vectorised (the scalar loop took 2% of a bf16 step)
    }
    if (rt->stage > 0) comm_allreduce_sum_f64(ss, rt->nb);
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
        zr_span g = local_grads(rt, b), p = zr_local(rt, b, ZR_PARAMETERS);
        zr_span m = zr_local(rt, b, ZR_EXP_AVG), v = zr_local(rt, b, ZR_EXP_AVG_SQ);
        int64_t lo = m.off, hi = m.off + m.n;   // the moments: this rank's part of the trained range
        // walk the parameters overlapping [lo, hi) so weight decay follows each tensor's rule; AdamW zeroes the
        // gradient it reads, the rest of this rank's part (untrained ranges, padding) is zeroed here (stage 2/3:
        // the slice is dropped instead)
        int64_t done = g.off;   // the gradient's elements before `done` are zero
        for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++) {
            const zr_tensor *q = &r->p[i];
            int64_t s = q->offset > lo ? q->offset : lo;
            int64_t e = q->offset + q->numel < hi ? q->offset + q->numel : hi;
            if (s >= e) continue;
            if (s > done) memset(zr_at(g, done), 0, sizeof(float) * (size_t)(s - done));
            os_k->adamw(zr_at(p, s), zr_at(g, s), zr_at(m, s), zr_at(v, s), e - s, lr, b1, b2, eps,
                     q->ndim >= 2 ? wd : 0.0f, gscale, step);
            done = e > done ? e : done;
        }
        if (g.off + g.n > done && rt->stage < 2) memset(zr_at(g, done), 0, sizeof(float) * (size_t)(g.off + g.n - done));
        if (rt->stage == 1) {   // the other ranks' slices of the all-reduced full gradient
            memset(rt->gfull[b], 0, sizeof(float) * (size_t)g.off);
            memset(rt->gfull[b] + g.off + g.n, 0, sizeof(float) * (size_t)(rt->padded[b] - g.off - g.n));
        }
        if (rt->stage >= 2) {   // the slice lives until the next step's first reduction of b
            os_free(rt->gshard[b]);
            rt->gshard[b] = NULL;
        }
        if (rt->stage == 1 || rt->stage == 2) {
            double t1 = os_now();
            comm_allgather_f32(rt->full[b], rt->slice[b]);
            rt->gather_bytes += (rt->nranks - 1) * 4 * rt->slice[b];
            tg += os_now() - t1;
        }
        zr_params_changed(rt, b);
    }
    rt->times.gather += tg;
    rt->times.optim += os_now() - t0 - tg;
}

int zr_first_nonfinite(zr_runtime *rt, int grads) {
    const zr_registry *r = rt->reg;
    int64_t first = r->np;
    for (int b = 0; b < rt->nb && first == r->np; b++) {
        if (!r->b[b].trainable) continue;
        zr_span g = local_grads(rt, b);
        int64_t j = k_first_nonfinite(grads ? g.p : zr_at(zr_local(rt, b, ZR_PARAMETERS), g.off), g.n);
        if (j < 0) continue;
        for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++)
            if (g.off + j >= r->p[i].offset && g.off + j < r->p[i].offset + r->p[i].numel) first = i;
    }
    comm_allreduce_min_i64(&first, 1);
    return first < r->np ? (int)first : -1;
}

int64_t zr_model_state_bytes(const zr_runtime *rt) {
    int64_t t = 0;
    for (int b = 0; b < rt->nb; b++) {
        int64_t np = rt->padded[b], s = rt->slice[b];
        t += 4 * (rt->stage == 3 ? s : np);
        if (!rt->reg->b[b].trainable) continue;
        t += 4 * (rt->stage >= 2 ? s : np) + 8 * part(rt, b, ZR_EXP_AVG).n;
    }
    return t;
}

void zr_read_bucket(zr_runtime *rt, int b, float *out) {
    const float *full = zr_gather(rt, b);
    memcpy(out, full, sizeof(float) * (size_t)rt->reg->b[b].numel);
    zr_release(rt, b);
}

void zr_read_grads(zr_runtime *rt, int b, float *out) {
    zr_span g = local_grads(rt, b);
    if (rt->stage < 2) {   // the full reduced gradient is on every rank
        memcpy(out, rt->gfull[b], sizeof(float) * (size_t)rt->reg->b[b].numel);
        return;
    }
    float *all = os_alloc_uninit(sizeof(float) * (size_t)rt->padded[b], "gradient bucket");   // slice + all-gather: whole
    memcpy(all + g.off, g.p, sizeof(float) * (size_t)g.n);
    comm_allgather_f32(all, g.n);
    memcpy(out, all, sizeof(float) * (size_t)rt->reg->b[b].numel);
    os_free(all);
}
