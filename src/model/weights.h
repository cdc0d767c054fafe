// How a model forward reaches its weights without knowing where they live: a table of calls that the owner of
// the parameters fills (the sharding runtime: os_runtime_weights in session/model_runtime.h). A forward opens a bucket (gather),
// may announce the next one early (prefetch), reads parameters by id while the bucket is open, and closes it
// (release); the owner checks every access and decides what each call costs (ZeRO-3: a collective).
// The backward's counterpart (os_grads) opens a bucket's gradient scope, reads gradient buffers by id inside it
// (NULL: frozen, not computed) and closes it; the owner does what a close means to it (loss terms over the
// parameters, the reduce-scatter of ZeRO-2/3).
#pragma once
#include "core/tensor.h"
#include <stdint.h>

typedef struct {
    void *ctx;                                              // the owner (e.g. a zr_runtime)
    void (*prefetch)(void *ctx, int bucket);                // start making bucket available (may do nothing)
    void (*gather)(void *ctx, int bucket);                  // open bucket: its parameters are readable until release
    void (*release)(void *ctx, int bucket);                 // close it
    const float *(*param)(void *ctx, int pid, const char *caller);   // parameter pid's data (its bucket open)
    // parameter pid as a tensor view (its bucket open), what the products read: a matrix-product operand
    // (os_param.gemm) whose owner keeps it rounded (bf16 mixed precision) is its bf16 copy, anything else its fp32
    // values; a matrix [shape[0], numel / shape[0]] (row-major, packed), a vector [numel] with one dimension
    os_tensor (*tensor)(void *ctx, int pid, const char *caller);
    // rows ids[0..n) (sorted, distinct) of 2-D parameter pid into out[n, cols], its bucket not open; every rank calls
    // it at the same point (the sharding runtime: a collective moving only those rows). NULL: the caller gathers
    void (*rows)(void *ctx, int pid, const int32_t *ids, int64_t n, float *out);
    // parameter pid's data when the owner keeps it whole between gathers (readable with its bucket closed: the
    // sharding runtime at ZeRO 0-2), else NULL (ZeRO-3: rows or a gather). NULL member: never
    const float *(*resident)(void *ctx, int pid);
} os_weights;

typedef struct {
    void *ctx;
    void (*open)(void *ctx, int bucket);                    // open bucket's gradient scope (nested opens count)
    void (*close)(void *ctx, int bucket);                   // close it
    float *(*grad)(void *ctx, int pid, const char *caller); // parameter pid's gradient (accumulate +=), NULL: frozen
} os_grads;

#define os_weight(w, pid) ((w)->param((w)->ctx, (pid), __func__))
#define os_weight_t(w, pid) ((w)->tensor((w)->ctx, (pid), __func__))
#define os_grad(g, pid) ((g)->grad((g)->ctx, (pid), __func__))
