// What this rank holds of one bucket, and in which state (one per bucket: zr_runtime.bk). Which of these buffers
// exist follows the runtime's policies (zero/policy.h); docs/zero.md "Buffer lifetimes and the pool".
#pragma once
#include <stdint.h>

typedef struct {
    int64_t padded, slice;   // padded numel (zr_padded), slice length (padded / nranks)
    // parameters
    float *full;             // the whole bucket [padded]: kept (parameters replicated) or gathered while a scope
                             // is open (sharded; under bf16 gathered for the products, it may hold only the fp32
                             // tensors' values: see exact)
    float *pshard;           // parameters sharded: this rank's slice [slice]
    int scope;               // open gather scopes
    void *prefetch;          // parameters sharded: the all-gather in flight (zr_prefetch), or NULL
    // gradients (trainable buckets only)
    float *gfull;            // the full gradient [padded]: kept (all-reduced) or only inside a gradient scope
                             // (reduce-scattered)
    float *gshard;           // reduce-scattered: the reduced slice [slice], from the step's first reduction of the
                             // bucket (or the optimizer side's first read) until AdamW (NULL between steps)
    int gscope;              // open gradient scopes
    float *m, *v;            // AdamW moments over zr_local(.., ZR_EXP_AVG/_SQ)
    // bf16 (zero/gather_bf16.h; zr_set_bf16)
    uint8_t has_gemm;        // holds a matrix-product operand (zr_tensor.gemm)
    uint16_t *rw;            // the bucket rounded to bf16 [padded]: replicated parameters keep
                             // and refresh it when they change; sharded ones gather it in bf16 per scope
    uint8_t stale;           // replicated: rw is out of date (or absent)
    uint8_t exact;           // sharded: full holds every value (a bf16 gather fills only the fp32 tensors)
    int64_t nx;              // sharded: the most fp32-tensor elements of the bucket in any rank's slice
    float *xbuf;             // sharded: those elements of every rank [nranks * nx], while their gather runs
    void *xreq;              // ... and its request
} zr_bucket_state;
