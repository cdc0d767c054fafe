#include "zero/policy.h"
#include "core/err.h"

#define PAD_UNIT 16

zr_policy zr_policy_of(int stage) {
    switch (stage) {
    case 0: return (zr_policy){ZR_PARAMS_REPLICATED, ZR_GRADS_ALLREDUCE, ZR_UPDATE_WHOLE, 0};
    case 1: return (zr_policy){ZR_PARAMS_REPLICATED, ZR_GRADS_ALLREDUCE, ZR_UPDATE_SLICE, 1};
    case 2: return (zr_policy){ZR_PARAMS_REPLICATED, ZR_GRADS_REDUCE_SCATTER, ZR_UPDATE_SLICE, 1};
    case 3: return (zr_policy){ZR_PARAMS_SHARDED, ZR_GRADS_REDUCE_SCATTER, ZR_UPDATE_SLICE, 0};
    }
    os_die("internal error: ZeRO stage %d (supported: 0, 1, 2, 3)", stage);
}

int64_t zr_padded(int64_t numel, int nranks) {
    int64_t unit = (int64_t)PAD_UNIT * nranks;
    return (numel + unit - 1) / unit * unit;
}

zr_span zr_part_of(const zr_bucket *k, int64_t padded, zr_policy pol, int rank, int nranks, zr_what what) {
    int64_t S = padded / nranks;
    zr_span whole = {NULL, 0, padded}, slice = {NULL, rank * S, S};
    if (what == ZR_PARAMETERS) return pol.params == ZR_PARAMS_SHARDED ? slice : whole;
    if (!k->trainable) return (zr_span){NULL, 0, 0};
    // the part the rank reduces and updates
    zr_span s = pol.update == ZR_UPDATE_WHOLE ? whole : slice;
    if (what == ZR_GRADIENTS) return s;
    int64_t a = s.off, e = s.off + s.n;   // the moments: that part within the trained range
    if (a < k->train_lo) a = k->train_lo;
    if (e > k->train_hi) e = k->train_hi;
    if (e < a) e = a;
    return (zr_span){NULL, a, e - a};
}

zr_span zr_part(const zr_bucket *k, int64_t padded, int stage, int rank, int nranks, zr_what what) {
    return zr_part_of(k, padded, zr_policy_of(stage), rank, nranks, what);
}
