// What the model's parameter declarations (model/params.h) and the runtime's registry (zero/registry.h) both say
// of a tensor and of a bucket. model/ and zero/ do not include each other (tools/check_layering.py), so the shared
// part is written once here; session/model_runtime.c copies one into the other with the same ids.
#pragma once
#include <stdint.h>

// The leading fields of a declared tensor (os_param, zr_tensor): its global name, shape (numel = the product of
// shape[0 .. ndim)) and the bucket it belongs to.
#define OS_TENSOR_DECL_FIELDS \
    char name[112];           \
    int ndim;                 \
    int64_t shape[4];         \
    int64_t numel;            \
    int bucket

// A bucket: tensors [first, first+count), laid out back to back in declaration order (numel elements), and the
// elements [train_lo, train_hi) of that layout that train (all when trainable; a row range of the embedding with
// --trainable_embed_rows; empty when frozen).
typedef struct {
    char name[64];
    int first, count;
    int64_t numel;
    int trainable;
    int64_t train_lo, train_hi;
} os_bucket_decl;
