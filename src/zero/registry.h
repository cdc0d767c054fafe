// The runtime's parameter registry: where every parameter lives. The model declares its tensors (model/params.h:
// name, shape, init rule, bucket, trained range); the runtime lays them out: a bucket is its tensors back to back in
// declaration order (offsets here), padded and cut in per-rank slices (zero/runtime.h). Tensor and bucket ids are
// the declaration's (train/ builds this registry from the model's declarations). Metadata lives on every rank.
#pragma once
#include <stdint.h>

typedef struct {
    char name[112];
    int ndim;
    int64_t shape[4];
    int64_t numel;
    int bucket;
    int64_t offset;       // element offset inside the bucket's flat buffer
    int trainable;        // any element inside its bucket's trained range
    int gemm;             // read only as a matrix-product operand (bf16: gathered rounded, docs/zero.md "bf16")
} zr_tensor;

typedef struct {
    char name[64];
    int first, count;     // tensors [first, first+count)
    int64_t numel;        // sum of their numel
    int trainable;
    int64_t train_lo, train_hi;   // trained elements [train_lo, train_hi) of the flat buffer (empty when frozen)
} zr_bucket;

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
