#include "zero/stage.h"
#include "core/alloc.h"
#include "kernels/ops.h"

int64_t zr_stage_piece(int64_t n) { return os_k->host_memory || n < ZR_STAGE_FLOATS ? n : ZR_STAGE_FLOATS; }

static float *buffer(zr_stage *st) {
    if (!st->buf) st->buf = os_alloc_uninit(sizeof(float) * (size_t)ZR_STAGE_FLOATS, "host staging buffer");
    return st->buf;
}

const float *zr_stage_read(zr_stage *st, const float *src, int64_t n) {
    if (os_k->host_memory) return src;
    float *h = buffer(st);
    os_k->download(h, src, (int64_t)sizeof(float) * n);
    return h;
}

float *zr_stage_write(zr_stage *st, float *dst, int64_t n) {
    (void)n;
    return os_k->host_memory ? dst : buffer(st);
}

void zr_stage_written(zr_stage *st, float *dst, const float *host, int64_t n) {
    (void)st;
    if (!os_k->host_memory) os_k->upload(dst, host, (int64_t)sizeof(float) * n);
}

void zr_stage_free(zr_stage *st) {
    os_free(st->buf);
    st->buf = NULL;
}

int zr_stage_put(zr_stage *st, os_st_writer *w, const float *src, int64_t n) {
    int rc = 0;
    for (int64_t o = 0, k; rc == 0 && o < n; o += k) {
        k = zr_stage_piece(n - o);
        rc = os_st_writer_put(w, zr_stage_read(st, src + o, k), k);
    }
    return rc;
}

int zr_stage_put_zeros(os_st_writer *w, int64_t n) {
    if (n <= 0) return 0;
    int64_t k = n < ZR_STAGE_FLOATS ? n : ZR_STAGE_FLOATS;
    float *z = os_alloc(sizeof(float) * (size_t)k, "zeros");
    int rc = 0;
    for (int64_t o = 0; rc == 0 && o < n; o += k) rc = os_st_writer_put(w, z, n - o < k ? n - o : k);
    os_free(z);
    return rc;
}
