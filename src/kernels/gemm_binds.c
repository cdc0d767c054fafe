// Operands rounded ahead by their owner (gemm_binds.h).
#include "kernels/gemm_binds.h"
#include "core/alloc.h"
#include <string.h>

void k_binds_set(k_binds *t, const float *w, int64_t n, const void *rounded) {
    k_binds_drop(t, w);
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 32;
        k_binding *nb = os_alloc(sizeof *nb * (size_t)t->cap, "bf16 bound operands");
        if (t->n) memcpy(nb, t->b, sizeof *nb * (size_t)t->n);
        os_free(t->b);
        t->b = nb;
    }
    t->b[t->n++] = (k_binding){w, n, rounded};
}

void k_binds_drop(k_binds *t, const float *w) {
    for (int i = 0; i < t->n; i++)
        if (t->b[i].w == w) {
            t->b[i] = t->b[--t->n];
            return;
        }
}

const void *k_binds_find(const k_binds *t, const float *src, int64_t rows, int64_t cols, int64_t ld, int esz) {
    for (int i = 0; i < t->n; i++) {
        const k_binding *e = &t->b[i];
        if (src >= e->w && src + (rows - 1) * ld + cols <= e->w + e->n) return (const char *)e->r + esz * (src - e->w);
    }
    return NULL;
}
