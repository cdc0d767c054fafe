#include "persist/dump.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/safetensors.h"
#include "zero/comm.h"
#include <string.h>

int os_dump_grads(zr_runtime *rt, const char *path) {
    const zr_registry *r = rt->reg;
    int root = comm_rank() == 0, rc = 0, n = 0;
    const char **names = os_alloc(sizeof(char *) * (size_t)r->np, "dump");
    int *nd = os_alloc(sizeof(int) * (size_t)r->np, "dump");
    int64_t(*sh)[8] = os_alloc(sizeof(int64_t[8]) * (size_t)r->np, "dump");
    for (int i = 0; i < r->np; i++) {
        if (!r->p[i].trainable) continue;
        names[n] = r->p[i].name, nd[n] = r->p[i].ndim;
        memcpy(sh[n], r->p[i].shape, sizeof(int64_t) * 4);
        n++;
    }
    os_st_writer *w = root ? os_st_writer_begin(path, n, names, nd, (const int64_t(*)[8])sh, NULL) : NULL;
    if (root && !w) rc = -1;
    for (int b = 0; b < r->nb; b++) {
        if (!r->b[b].trainable) continue;
        float *g = os_alloc(sizeof(float) * (size_t)r->b[b].numel, "dump bucket");
        zr_read_grads(rt, b, g);
        if (w && rc == 0) rc = os_st_writer_put(w, g, r->b[b].numel);
        os_free(g);
    }
    if (w) rc = rc == 0 ? os_st_writer_finish(w) : (os_st_writer_abort(w), -1);
    os_free(names), os_free(nd), os_free(sh);
    return rc;
}

int os_dump_logits(const char *path, const float *logits, int64_t rows, int64_t V) {
    const char *name = "logits";
    int nd = 2;
    int64_t sh[1][8] = {{rows, V}};
    return os_st_write_f32(path, 1, &name, &nd, (const int64_t(*)[8])sh, &logits, NULL);
}
