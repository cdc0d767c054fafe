#include "model/load.h"
#include "core/err.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "model/mean_rows.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

// the checkpoint tensor of parameter p (NULL if absent); name[n] receives the name looked up
static const os_st_tensor *find(const os_st_dir *d, const os_param *p, const os_name_map *map, char *name, int n) {
    size_t k = map ? strlen(map->from) : 0;
    if (map && !strncmp(p->name, map->from, k)) snprintf(name, (size_t)n, "%s%s", map->to, p->name + k);
    else snprintf(name, (size_t)n, "%s", p->name);
    return d ? os_st_dir_find(d, name) : NULL;
}

int os_params_check(const os_registry *r, const os_st_dir *d, const char *dir) {
    return os_params_check_map(r, d, dir, 0, r->nb, NULL);
}

int os_params_check_map(const os_registry *r, const os_st_dir *d, const char *dir, int b0, int b1,
                        const os_name_map *map) {
    int i0 = b0 < r->nb ? r->b[b0].first : r->np, i1 = b1 < r->nb ? r->b[b1].first : r->np;
    for (int i = i0; i < i1; i++) {
        const os_param *p = &r->p[i];
        char name[256];
        const os_st_tensor *t = find(d, p, map, name, sizeof name);
        char a[96], b[96];
        if (!t) {
            if (p->init == OS_INIT_REQUIRED || p->resizable)
                return os_errf("%s: tensor '%s' %s is missing from the checkpoint", dir, name,
                               os_shape_str(p->shape, p->ndim, a, sizeof a));
            continue;
        }
        int ok = t->ndim == p->ndim;
        for (int k = 1; ok && k < p->ndim; k++) ok = t->shape[k] == p->shape[k];
        if (ok) ok = p->resizable ? t->shape[0] >= 1 && t->shape[0] <= p->shape[0] : t->shape[0] == p->shape[0];
        if (!ok)
            return os_errf("%s: tensor '%s': shape %s does not match the model's %s%s", dir, name,
                           os_shape_str(t->shape, t->ndim, a, sizeof a), os_shape_str(p->shape, p->ndim, b, sizeof b),
                           p->resizable ? " (at most that many rows)" : "");
        if (t->dtype != OS_DT_F32 && t->dtype != OS_DT_F16 && t->dtype != OS_DT_BF16 && t->dtype != OS_DT_F64)
            return os_errf("%s: tensor '%s': dtype %s is not a float type", dir, name, os_st_dtype_name(t->dtype));
    }
    return 0;
}

// initialise elements [s, s+n) of parameter p (flat index) into dst
static void init_range(const os_param *p, int64_t s, int64_t n, float *dst, uint64_t seed) {
    uint64_t key = os_hash_str(p->name, seed);
    float bound = p->fan_in > 0 ? 1.0f / sqrtf((float)p->fan_in) : 0.0f;
    switch (p->init) {
    case OS_INIT_NORMAL: os_rng_fill_normal(dst, n, key, s, 0.0f, p->init_arg); break;
    case OS_INIT_LINEAR_W:
    case OS_INIT_LINEAR_B: os_rng_fill_uniform(dst, n, key, s, -bound, bound); break;
    case OS_INIT_ONES:
        for (int64_t j = 0; j < n; j++) dst[j] = 1.0f;
        break;
    default: memset(dst, 0, sizeof(float) * (size_t)n); break;
    }
}

int os_params_fill(const os_registry *r, const os_st_dir *d, const os_name_map *map, int i, int64_t ps, int64_t pn,
                   float *out, uint64_t seed) {
    const os_param *p = &r->p[i];
    char name[256];
    const os_st_tensor *t = find(d, p, map, name, sizeof name);
    int64_t have = t ? t->numel : 0;          // leading elements available from the checkpoint (row-major)
    if (ps < have) {
        int64_t k = pn < have - ps ? pn : have - ps;
        if (os_st_read_f32(t, ps, k, out) < 0) return os_err_ctx("tensor '%s'", name);
        int64_t bad = k_first_nonfinite(out, k);
        if (bad >= 0)
            return os_errf("tensor '%s': element %lld is %s (an input model must hold finite values only)", name,
                           (long long)(ps + bad), isnan(out[bad]) ? "NaN" : "infinite");
        out += k, ps += k, pn -= k;
    }
    if (pn > 0 && p->init == OS_INIT_MEAN_ROWS) {
        os_mean_rows st;
        if (!t) return os_errf("tensor '%s': its new rows are initialised from the checkpoint's rows, which are missing", name);
        if (os_mean_rows_init(&st, t, name) < 0) return -1;
        os_mean_rows_fill(&st, os_hash_str(p->name, seed), ps, pn, out);
        os_mean_rows_free(&st);
    } else if (pn > 0) {
        init_range(p, ps, pn, out, seed);
    }
    return 0;
}
