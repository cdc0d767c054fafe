#include "zero/registry.h"
#include "core/alloc.h"
#include "core/err.h"
#include <stdio.h>
#include <string.h>

void zr_reg_init(zr_registry *r, int nb, int np) {
    memset(r, 0, sizeof *r);
    r->p = os_alloc(sizeof *r->p * (size_t)(np ? np : 1), "parameter registry");
    r->b = os_alloc(sizeof *r->b * (size_t)(nb ? nb : 1), "parameter registry");
}

void zr_reg_bucket(zr_registry *r, const char *name, int trainable, int64_t lo, int64_t hi) {
    zr_bucket *k = &r->b[r->nb++];
    memset(k, 0, sizeof *k);
    OS_ASSERT(strlen(name) < sizeof k->name);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->first = r->np, k->trainable = trainable;
    k->train_lo = trainable ? lo : 0, k->train_hi = trainable ? hi : 0;
}

void zr_reg_tensor(zr_registry *r, const char *name, int ndim, const int64_t *shape) {
    OS_ASSERT(r->nb > 0 && ndim >= 1 && ndim <= 4);
    zr_bucket *k = &r->b[r->nb - 1];
    zr_tensor *p = &r->p[r->np++];
    memset(p, 0, sizeof *p);
    OS_ASSERT(strlen(name) < sizeof p->name);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim, p->numel = 1;
    for (int i = 0; i < ndim; i++) p->shape[i] = shape[i], p->numel *= shape[i];
    p->bucket = r->nb - 1, p->offset = k->numel;
    p->trainable = k->trainable && p->offset < k->train_hi && p->offset + p->numel > k->train_lo;
    k->numel += p->numel, k->count++;
}

void zr_reg_free(zr_registry *r) {
    os_free(r->p);
    os_free(r->b);
    memset(r, 0, sizeof *r);
}

const char *zr_tensor_desc(const zr_tensor *p, char *buf, int n) {
    char shape[96];
    snprintf(buf, (size_t)n, "%s %s", p->name, os_shape_str(p->shape, p->ndim, shape, sizeof shape));
    return buf;
}
