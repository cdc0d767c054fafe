#include "model/params.h"
#include "core/alloc.h"
#include "core/err.h"
#include <stdio.h>
#include <string.h>

static void *grow(void *old, int n, int *cap, size_t elem) {
    if (n < *cap) return old;
    int nc = *cap ? *cap * 2 : 64;
    void *p = os_alloc((size_t)nc * elem, "parameter registry");
    if (old) memcpy(p, old, (size_t)n * elem);
    os_free(old);
    *cap = nc;
    return p;
}

int os_reg_bucket(os_registry *r, const char *name, int trainable) {
    r->b = grow(r->b, r->nb, &r->cap_b, sizeof *r->b);
    os_bucket *b = &r->b[r->nb];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    b->first = r->np;
    b->trainable = trainable;
    return r->nb++;
}

int os_reg_param(os_registry *r, const char *name, int ndim, const int64_t *shape, os_init_kind init, float arg) {
    OS_ASSERT(r->nb > 0 && ndim >= 1 && ndim <= 4);
    r->p = grow(r->p, r->np, &r->cap_p, sizeof *r->p);
    os_bucket *b = &r->b[r->nb - 1];
    os_param *p = &r->p[r->np];
    memset(p, 0, sizeof *p);
    OS_ASSERT(strlen(name) < sizeof p->name);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) p->shape[i] = shape[i], p->numel *= shape[i];
    p->bucket = r->nb - 1;
    p->init = init;
    p->init_arg = arg;
    p->fan_in = ndim >= 2 ? shape[1] : 0;
    b->numel += p->numel;
    b->count++;
    if (b->trainable) b->train_hi = b->numel;
    return r->np++;
}

int os_reg_find(const os_registry *r, const char *name) {
    for (int i = 0; i < r->np; i++)
        if (!strcmp(r->p[i].name, name)) return i;
    return -1;
}

int64_t os_reg_numel(const os_registry *r, int trainable_only) {
    int64_t n = 0;
    if (trainable_only) {
        for (int b = 0; b < r->nb; b++)
            if (r->b[b].trainable) n += r->b[b].train_hi - r->b[b].train_lo;
        return n;
    }
    for (int i = 0; i < r->np; i++) n += r->p[i].numel;
    return n;
}

static void set_trainable(os_registry *r, int b, int on, int64_t lo, int64_t hi) {
    os_bucket *k = &r->b[b];
    k->trainable = on, k->train_lo = lo, k->train_hi = hi;
}

void os_reg_freeze(os_registry *r, int b) { set_trainable(r, b, 0, 0, 0); }

void os_reg_train_range(os_registry *r, int b, int64_t lo, int64_t hi) {
    OS_ASSERT(0 <= lo && lo < hi && hi <= r->b[b].numel);
    set_trainable(r, b, 1, lo, hi);
}

void os_reg_free(os_registry *r) {
    os_free(r->p);
    os_free(r->b);
    memset(r, 0, sizeof *r);
}
