// What a ZeRO stage shards, when it gathers and how it reduces: the stage number is turned into these named
// policies once (zr_policy_of, at zr_init); the runtime reads them, never the stage. Also where a rank's part of a
// bucket lies (zr_part), which the memory plan (src/train/plan.c) computes with, without a runtime.
//
//   stage | parameters            | gradients                            | AdamW update and moments
//   0     | whole, every rank     | whole, all-reduced once per step     | whole, every rank
//   1     | whole, every rank     | whole, all-reduced once per step     | own slice; then params all-gathered
//   2     | whole, every rank     | reduce-scattered at each scope close | own slice; then params all-gathered
//   3     | own slice; gathered   | reduce-scattered at each scope close | own slice
//         | per scope, dropped    |                                      |
#pragma once
#include "zero/registry.h"
#include <stdint.h>

// where parameter values live between uses
typedef enum {
    ZR_PARAMS_REPLICATED,   // the whole bucket on every rank, readable in any scope (stages 0-2)
    ZR_PARAMS_SHARDED,      // each rank keeps its slice; a gather scope all-gathers the bucket (or finishes the
                            // prefetch), the scope's last release drops it (stage 3)
} zr_param_policy;

// how a gradient bucket is reduced over the ranks
typedef enum {
    ZR_GRADS_ALLREDUCE,       // the full gradient buffer lives for the run; zr_reduce_grads sums it over ranks
                              // once per optimizer step (stages 0-1)
    ZR_GRADS_REDUCE_SCATTER,  // the full buffer exists only inside a gradient scope; its close starts a
                              // reduce-scatter into this rank's slice, which lives until AdamW (stages 2-3)
} zr_grad_policy;

// which part of a bucket a rank updates (AdamW) and holds moments for
typedef enum {
    ZR_UPDATE_WHOLE,   // every rank updates the whole bucket (stage 0)
    ZR_UPDATE_SLICE,   // each rank updates its slice (stages 1-3)
} zr_update_policy;

typedef struct {
    zr_param_policy params;
    zr_grad_policy grads;
    zr_update_policy update;
    // after AdamW, all-gather the updated slices into the whole parameters (parameters replicated, updated by
    // slice: stages 1-2)
    int gather_after_update;
} zr_policy;

// the policies of ZeRO stage 0-3 (the table above)
zr_policy zr_policy_of(int stage);

// What a rank holds of a bucket (zr_local, zr_part).
typedef enum { ZR_PARAMETERS, ZR_GRADIENTS, ZR_EXP_AVG, ZR_EXP_AVG_SQ } zr_what;
// Elements [off, off + n) of a bucket, stored at p[0 .. n) (p[i - off] is element i); n 0 (p NULL) when none.
typedef struct {
    float *p;
    int64_t off, n;
} zr_span;
// element i of the bucket within span s
static inline float *zr_at(zr_span s, int64_t i) { return s.p + (i - s.off); }

// A bucket's padded length: a multiple of 16 * nranks, so that every slice is 64-byte aligned
int64_t zr_padded(int64_t numel, int nranks);
// The part of bucket k (padded to `padded` elements) rank `rank` of nranks holds for `what`, without a pointer
// (zr_local in zero/runtime.h says what each part is); zr_part takes the stage number, zr_part_of its policies.
zr_span zr_part_of(const zr_bucket *k, int64_t padded, zr_policy pol, int rank, int nranks, zr_what what);
zr_span zr_part(const zr_bucket *k, int64_t padded, int stage, int rank, int nranks, zr_what what);
