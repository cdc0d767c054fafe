// The model's parameter declarations: every parameter's global (Hugging Face / SLAM-LLM) name, full shape, the
// bucket it belongs to (declaration order within the bucket), and how it is initialised when a checkpoint lacks
// it; per bucket whether it trains and which of its elements. Where a parameter lives (offsets in a bucket's
// buffer, padding, per-rank slices) is the runtime's (zero/registry.h), which train/ builds from these
// declarations with the same ids. Metadata lives on every rank; the model holds no parameter data.
#pragma once
#include "core/tensor_decl.h"
#include <stdint.h>

typedef enum {
    OS_INIT_REQUIRED,   // must come from the checkpoint
    OS_INIT_NORMAL,     // normal(0, arg)
    OS_INIT_MEAN_ROWS,  // rows past the checkpoint's: N(mean, 1e-9 cov) of its rows (model/mean_rows.h)
    OS_INIT_LINEAR_W,   // PyTorch nn.Linear default: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in))
    OS_INIT_LINEAR_B,   // same bound for the bias
    OS_INIT_ONES,
    OS_INIT_ZEROS,
} os_init_kind;

typedef struct {
    OS_TENSOR_DECL_FIELDS;   // name, ndim, shape, numel, bucket (core/tensor_decl.h)
    os_init_kind init;
    float init_arg;       // std for NORMAL
    int64_t fan_in;       // for LINEAR_*
    int resizable;        // dim 0 may be longer than the checkpoint's (vocabulary resize): extra rows use init
    int gemm;             // the forward and backward read it only as a matrix-product operand (matmul): under
                          // bf16 its owner may hand the products a bf16 copy instead (os_weights.tensor)
} os_param;

typedef os_bucket_decl os_bucket;   // the runtime's zr_bucket is the same type

typedef struct {
    os_param *p;
    int np, cap_p;
    os_bucket *b;
    int nb, cap_b;
} os_registry;

// start a new bucket; following os_reg_param calls add to it. Returns the bucket id.
int os_reg_bucket(os_registry *r, const char *name, int trainable);
// add a parameter (shape of ndim dims) to the current bucket; returns its id
int os_reg_param(os_registry *r, const char *name, int ndim, const int64_t *shape, os_init_kind init, float arg);
int os_reg_find(const os_registry *r, const char *name);   // -1 if absent
// trainable_only: the elements that are trained (each bucket's [train_lo, train_hi))
int64_t os_reg_numel(const os_registry *r, int trainable_only);
// freeze bucket b (its parameters get no gradient buffer and no optimizer state in the runtime)
void os_reg_freeze(os_registry *r, int b);
// train only elements [lo, hi) of bucket b (b trainable again if it was frozen); elements outside stay bit-identical
void os_reg_train_range(os_registry *r, int b, int64_t lo, int64_t hi);
void os_reg_free(os_registry *r);
