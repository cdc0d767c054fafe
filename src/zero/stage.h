// Host access to backend memory (kernels/ops.h) in pieces, for the code that reads or writes buckets on the host:
// the model load and the checkpoint's rank files (zero/), export (persist/). On a backend whose memory is the
// host's (os_k->host_memory) a piece is the whole range and the host pointer is the memory itself: no copy, as
// before the seam. Otherwise a piece is at most ZR_STAGE_FLOATS floats, downloaded into or uploaded from one host
// buffer that the stage keeps (never a whole second copy of a bucket on the host).
#pragma once
#include "io/safetensors.h"
#include <stdint.h>

#define ZR_STAGE_FLOATS ((int64_t)1 << 22)   // 16 MiB

typedef struct {
    float *buf;   // the host buffer (NULL until a piece needs it; zr_stage_free frees it)
} zr_stage;

// the floats of the next piece of a range of n: n on host memory, else at most ZR_STAGE_FLOATS
int64_t zr_stage_piece(int64_t n);
// a host pointer holding backend src[n] (n <= zr_stage_piece(n)): src itself, or the buffer after a download
const float *zr_stage_read(zr_stage *st, const float *src, int64_t n);
// a host pointer to write backend dst[n] through: dst itself, or the buffer; zr_stage_written uploads it to dst
float *zr_stage_write(zr_stage *st, float *dst, int64_t n);
void zr_stage_written(zr_stage *st, float *dst, const float *host, int64_t n);
void zr_stage_free(zr_stage *st);
// backend src[n] appended to w a piece at a time (0, or -1 + message), and n zeros
int zr_stage_put(zr_stage *st, os_st_writer *w, const float *src, int64_t n);
int zr_stage_put_zeros(os_st_writer *w, int64_t n);
