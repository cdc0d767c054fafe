#include "session/model_runtime.h"

void os_runtime_registry(const os_registry *decl, zr_registry *out) {
    zr_reg_init(out, decl->nb, decl->np);
    for (int b = 0; b < decl->nb; b++) {
        const os_bucket *k = &decl->b[b];
        zr_reg_bucket(out, k->name, k->trainable, k->train_lo, k->train_hi);
        for (int i = k->first; i < k->first + k->count; i++) {
            zr_reg_tensor(out, decl->p[i].name, decl->p[i].ndim, decl->p[i].shape);
            out->p[i].gemm = decl->p[i].gemm;
        }
    }
}

void os_runtime_init(zr_runtime *rt, const os_registry *decl, int stage, int rank, int nranks) {
    zr_registry reg;
    os_runtime_registry(decl, &reg);
    zr_init(rt, &reg, stage, rank, nranks);
}

typedef struct {
    const os_registry *decl;
    const os_st_dir *d;
    const os_name_map *map;
    uint64_t seed;
} fill_ctx;

static int fill_piece(void *ctx, int i, int64_t start, int64_t n, float *dst) {
    fill_ctx *c = ctx;
    return os_params_fill(c->decl, c->d, c->map, i, start, n, dst, c->seed) < 0 ? -1 : 0;
}

int os_runtime_fill(zr_runtime *rt, const os_registry *decl, int b, const os_st_dir *d, const os_name_map *map,
                    uint64_t seed) {
    fill_ctx c = {decl, d, map, seed};
    return zr_fill(rt, b, fill_piece, &c);
}

static void w_prefetch(void *rt, int b) { zr_prefetch(rt, b); }
static void w_gather(void *rt, int b) { zr_gather_compute(rt, b); }   // the products' weights: bf16 at stage 3
static void w_release(void *rt, int b) { zr_release(rt, b); }
static const float *w_param(void *rt, int pid, const char *caller) { return zr_param_at(rt, pid, caller); }
static os_tensor w_tensor(void *rt, int pid, const char *caller) { return zr_tensor_at(rt, pid, caller); }
static void w_rows(void *rt, int pid, const int32_t *ids, int64_t n, float *out) { zr_read_rows(rt, pid, ids, n, out); }
static const float *w_resident(void *rt, int pid) { return zr_resident(rt, pid); }

os_weights os_runtime_weights(zr_runtime *rt) {
    return (os_weights){.ctx = rt, .prefetch = w_prefetch, .gather = w_gather, .release = w_release, .param = w_param,
                        .tensor = w_tensor, .rows = w_rows, .resident = w_resident};
}
