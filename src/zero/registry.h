// The runtime's parameter registry: where every parameter lives. The model declares its tensors (model/params.h:
// name, shape, init rule, bucket, trained range); the runtime lays them out: a bucket is its tensors back to back in
// declaration order (offsets here), padded and cut in per-rank slices (zero/runtime.h). Tensor and bucket ids are
// the declaration's (train/ builds this registry from the model's declarations). Metadata lives on every rank.
#pragma once
#include "core/tensor_decl.h"
#include <stdint.h>

typedef struct {
    OS_TENSOR_DECL_FIELDS;   // name, ndim, shape, numel, bucket (core/tensor_decl.h)
    int64_t offset;       // element offset inside the bucket's flat buffer
    int trainable;        // any element inside its bucket's trained range
    int gemm;             // read only as a matrix-product operand (bf16: gathered rounded, docs/zero.md "bf16")
} zr_tensor;

typedef os_bucket_decl zr_bucket;   // the model's os_bucket is the same type

typedef struct {
    zr_tensor *p;
    int np;
    zr_bucket *b;
    int nb;
} zr_registry;

// room for nb buckets and np tensors, added in order with zr_reg_bucket / zr_reg_tensor
void zr_reg_init(zr_registry *r, int nb, int np);
// the next bucket, trained on its elements [lo, hi) (ignored when trainable is 0)
void zr_reg_bucket(zr_registry *r, const char *name, int trainable, int64_t lo, int64_t hi);
// the next tensor, placed after the previous tensors of the last bucket
void zr_reg_tensor(zr_registry *r, const char *name, int ndim, const int64_t *shape);
void zr_reg_free(zr_registry *r);
// "name [d0, d1]" into buf
const char *zr_tensor_desc(const zr_tensor *p, char *buf, int n);
