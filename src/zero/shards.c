#include "zero/shards.h"
#include "core/alloc.h"
#include "core/err.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "zero/stage.h"
#include <math.h>
#include <stdio.h>

static const char *KINDS[3] = {"param", "exp_avg", "exp_avg_sq"};
static const zr_what WHAT[3] = {ZR_PARAMETERS, ZR_EXP_AVG, ZR_EXP_AVG_SQ};

// rank r's range of a bucket of numel values cut in slices of S: [r*S, min((r+1)*S, numel)); its length
static int64_t range_len(int64_t numel, int64_t S, int r) {
    int64_t lo = (int64_t)r * S, hi = lo + S < numel ? lo + S : numel;
    return hi > lo ? hi - lo : 0;
}

// this rank's values of kind k for its slice of bucket b, n of them, into w (from the backend's memory, a piece at
// a time): the values the rank holds, zeros where it holds none (moments outside the trained range of the bucket)
static int put_slice(const zr_runtime *rt, int b, int k, int64_t n, os_st_writer *w, zr_stage *st) {
    int64_t off = rt->rank * rt->bk[b].slice;
    zr_span s = zr_local(rt, b, WHAT[k]);
    int64_t lo = s.off > off ? s.off : off, hi = s.off + s.n < off + n ? s.off + s.n : off + n;
    if (hi <= lo) lo = hi = off + n;
    int rc = zr_stage_put_zeros(w, lo - off);
    if (rc == 0 && hi > lo) rc = zr_stage_put(st, w, zr_at(s, lo), hi - lo);
    return rc == 0 ? zr_stage_put_zeros(w, off + n - hi) : rc;
}

int zr_shards_write(const zr_runtime *rt, int nb, const char *path, int with_optim, const char *const *meta_kv) {
    const zr_registry *r = rt->reg;
    int nt = 0, cap = 3 * (nb ? nb : 1);
    char(*names)[96] = os_alloc(sizeof(char[96]) * (size_t)cap, "checkpoint names");
    const char **np = os_alloc(sizeof(char *) * (size_t)cap, "checkpoint names");
    int *nd = os_alloc(sizeof(int) * (size_t)cap, "checkpoint");
    int64_t(*sh)[8] = os_alloc(sizeof(int64_t[8]) * (size_t)cap, "checkpoint");
    int(*bk)[2] = os_alloc(sizeof(int[2]) * (size_t)cap, "checkpoint");   // each tensor's bucket and kind
    for (int b = 0; b < nb; b++)
        for (int k = 0; k < (with_optim && r->b[b].trainable ? 3 : 1); k++) {
            snprintf(names[nt], 96, "%s/%s", KINDS[k], r->b[b].name);
            np[nt] = names[nt], nd[nt] = 1, sh[nt][0] = range_len(r->b[b].numel, rt->bk[b].slice, rt->rank);
            bk[nt][0] = b, bk[nt][1] = k;
            nt++;
        }
    os_st_writer *w = os_st_writer_begin(path, nt, np, nd, (const int64_t(*)[8])sh, meta_kv);
    int rc = w ? 0 : -1;
    zr_stage st = {0};
    for (int i = 0; rc == 0 && i < nt; i++) rc = put_slice(rt, bk[i][0], bk[i][1], sh[i][0], w, &st);
    zr_stage_free(&st);
    if (w) rc = rc == 0 ? os_st_writer_finish(w) : (os_st_writer_abort(w), -1);
    os_free(names), os_free(np), os_free(nd), os_free(sh), os_free(bk);
    return rc;
}

// read elements [lo, hi) of bucket b, kind k, from the rank files into dst (backend memory, a piece at a time
// through st; zeros past numel)
static int read_range(const zr_shard_source *c, const zr_registry *reg, int b, int k, int64_t lo, int64_t hi,
                      float *dst, zr_stage *st) {
    int64_t numel = reg->b[b].numel, S = c->slice[b];
    os_k->zero(dst, hi - lo);
    char name[96];
    snprintf(name, sizeof name, "%s/%s", KINDS[k], reg->b[b].name);
    for (int64_t p = lo; p < hi && p < numel;) {
        int r = (int)(p / S);
        int64_t rlo = (int64_t)r * S, rhi = rlo + range_len(numel, S, r), e = rhi < hi ? rhi : hi;
        os_st_file *f = c->open(c->ctx, r);
        if (!f) return -1;
        const os_st_tensor *t = os_st_find(f, name);
        if (!t || t->numel != rhi - rlo)
            return os_errf("%s: rank %d file: tensor '%s' missing or of the wrong size", c->what, r, name);
        for (int64_t n; p < e; p += n) {   // read and checked on the host, then to the backend
            n = zr_stage_piece(e - p);
            float *d = dst + (p - lo), *h = zr_stage_write(st, d, n);
            if (os_st_read_f32(t, p - rlo, n, h) < 0) return -1;
            int64_t bad = k_first_nonfinite(h, n);
            for (int i = reg->b[b].first; bad >= 0 && i < reg->b[b].first + reg->b[b].count; i++)
                if (p + bad >= reg->p[i].offset && p + bad < reg->p[i].offset + reg->p[i].numel)
                    return os_errf("%s: rank %d file: tensor '%s' (parameter '%s'): element %lld is %s (a checkpoint "
                                   "must hold finite values only)", c->what, r, name, reg->p[i].name,
                                   (long long)(p + bad - reg->p[i].offset), isnan(h[bad]) ? "NaN" : "infinite");
            zr_stage_written(st, d, h, n);
        }
    }
    return 0;
}

int zr_shards_read(zr_runtime *rt, int nb, const zr_shard_source *src, int optim) {
    const zr_registry *reg = rt->reg;
    int rc = 0;
    zr_stage st = {0};
    for (int b = 0; rc == 0 && b < nb; b++) {
        for (int k = 0; rc == 0 && k < (optim && reg->b[b].trainable ? 3 : 1); k++) {
            zr_span s = zr_local(rt, b, WHAT[k]);
            rc = read_range(src, reg, b, k, s.off, s.off + s.n, s.p, &st);
        }
        zr_params_changed(rt, b);
    }
    zr_stage_free(&st);
    return rc;
}
