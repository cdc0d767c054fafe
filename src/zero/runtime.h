// The sharding runtime (ZeRO stages 0-3). It owns every parameter, gradient and optimizer buffer.
// Buckets are the unit: one contiguous buffer each, padded to a multiple of 16*N so a rank's slice is a plain
// range [rank*S, (rank+1)*S). Parameter data is reachable only inside a gather scope (zr_gather/zr_release),
// gradient buffers only inside a gradient scope (zr_grad_open/zr_grad_close); outside, zr_param/zr_grad stop
// with the parameter's name, shape, stage and the caller. Every rank issues the same collectives in the same
// order: the step's schedule depends on the model and config only.
// zr_init turns the stage into named policies (zero/policy.h: what is sharded, when it is gathered, how gradients
// are reduced); the runtime follows them:
//   stage 0: full params, full grads (all-reduced), full optimizer state on every rank
//   stage 1: + optimizer state sharded (each rank updates its slice, then params are all-gathered)
//   stage 2: + gradients sharded (reduce-scatter as each bucket's backward ends)
//   stage 3: + parameters sharded (gathered per bucket for forward and again for backward, then dropped)
#pragma once
#include "core/tensor.h"
#include "zero/bucket_state.h"
#include "zero/policy.h"
#include "zero/registry.h"
#include <stdint.h>

// Seconds spent in the runtime's phases (core/timer.h), accumulated; the caller reads and clears them (logging.jsonl
// "time/*", docs/training.md). gather: waiting for parameter all-gathers (stage 3 gathers; stage 1/2 the all-gather
// after AdamW); reduce: gradient reduce-scatter (stage 2/3, with the add into the slice) or all-reduce (stage 0/1);
// optim: gradient norm, AdamW and gradient zeroing.
typedef struct {
    double gather, reduce, optim;
} zr_times;

typedef struct {
    int stage, rank, nranks;   // stage: for messages and checkpoints; the runtime itself reads pol
    zr_policy pol;             // the stage's policies (zr_policy_of)
    zr_registry *reg;          // where each parameter lives (owned)
    int nb;
    zr_bucket_state *bk;       // per bucket [nb]: its sizes and the buffers this rank holds of it
    // gradients reduce-scattered: the reduce-scatter in flight (at most one; docs/zero.md "Overlap"): its bucket
    // (-1: none), request, the full gradient it reads and, for a later micro-batch of an accumulation, the slice it
    // writes (added into the bucket's gshard when it completes; the step's first reduction writes gshard itself)
    int red_b;
    void *red_req;
    float *red_full, *red_tmp;
    int64_t live_gathered;     // bytes of gathered buffers now (parameters sharded)
    int64_t peak_gathered;
    zr_times times;            // accumulated since the caller last cleared it
    int64_t gather_bytes;      // bytes this rank received by parameter all-gathers, accumulated (the caller clears)
    int bf16;                  // zr_set_bf16 (zero/gather_bf16.h)
} zr_runtime;

// Take the registry over (*reg is left empty) and allocate buffers. Parameter values are filled afterwards (each
// rank its own part: zr_local(rt, b, ZR_PARAMETERS) or zr_fill).
void zr_init(zr_runtime *rt, zr_registry *reg, int stage, int rank, int nranks);
void zr_free(zr_runtime *rt);
// Where this rank's part of bucket b lives for `what` (elements of the padded bucket; policies: zero/policy.h):
//   parameters  what it keeps between steps: the whole bucket when replicated (stages 0-2), its slice
//               [r*S, (r+1)*S) when sharded (3) (write the initial values there after zr_init)
//   gradients   the part it updates: the whole bucket (update whole: stage 0) or its slice (by slice: 1-3); in the
//               full gradient buffer when all-reduced (0/1), the reduced slice when reduce-scattered (2/3), which
//               exists only within a step: p is NULL before the step's first reduction into it and after AdamW;
//               none for a frozen bucket
//   exp_avg(_sq) the AdamW moments: its part (as for gradients) within the bucket's trained range; none when frozen
zr_span zr_local(const zr_runtime *rt, int b, zr_what what);
// The same without a runtime: zr_part (zero/policy.h).
// Write the initial values of this rank's part of bucket b: fill(ctx, tensor, start, n, dst) for each piece of a
// tensor in it (its elements [start, start+n) into dst[n]); zeros in the padding. 0, or fill's first nonzero.
typedef int (*zr_fill_fn)(void *ctx, int tensor, int64_t start, int64_t n, float *dst);
int zr_fill(zr_runtime *rt, int b, zr_fill_fn fill, void *ctx);

// bf16 mixed precision (on 1; after zr_init, with k_gemm's bf16 mode on): the products read the matrices
// (zr_tensor.gemm) rounded once, never rounding them per product (zero/gather_bf16.h). Parameters replicated (stages
// 0-2): each bucket holding a matrix keeps a rounded copy (bf16, 2 bytes per element),
// refreshed at the first gather after its parameters changed (AdamW, zr_fill, zr_shards_read). Sharded (stage 3):
// zr_gather_compute and zr_prefetch gather such a bucket in bf16 (each rank rounds its slice; 2 bytes per element on
// the wire) plus its fp32 tensors (norms, biases) exactly; the fp32 master slices, gradients and AdamW are unchanged.
// The values the products read are bitwise those of rounding in every product.
void zr_set_bf16(zr_runtime *rt, int on);
// Parameter values of bucket b were written through zr_local: drop its rounded copy (replicated parameters, bf16)
void zr_params_changed(zr_runtime *rt, int b);

// ---- scopes ----
// start the all-gather of b early (parameters sharded; no-op otherwise), for zr_gather_compute (in bf16 under
// zr_set_bf16)
void zr_prefetch(zr_runtime *rt, int b);
float *zr_gather(zr_runtime *rt, int b);        // open a gather scope; returns the full bucket buffer
// open a gather scope for the model's products: under bf16 with sharded parameters, the buffer holds exact values only
// in the fp32 tensors (zr_tensor.gemm 0); the matrices are read from their rounded gathered copy (zr_tensor_at; their
// fp32 values are not there). Otherwise zr_gather. A zr_gather of a bucket so gathered completes it with an fp32
// all-gather.
float *zr_gather_compute(zr_runtime *rt, int b);
void zr_release(zr_runtime *rt, int b);         // close it (sharded: the last close drops the buffer)
// Frozen buckets (registry trainable 0) have no gradient: zr_grad_open returns NULL, zr_grad_close does nothing and
// zr_grad gives NULL for their parameters (the kernels then skip that gradient), on every rank alike.
float *zr_grad_open(zr_runtime *rt, int b);     // open a gradient scope; returns the full gradient buffer
// close: zero what is outside the trained range; gradients reduce-scattered: start the reduce-scatter into the
// slice (the buffer is dropped when it completes: at the latest at the next zr_grad_open or close, or when the
// optimizer side reads gradients)
void zr_grad_close(zr_runtime *rt, int b);
// Rows ids[0..n) (sorted, distinct, in range) of 2-D parameter pid ([rows, cols]) into out[n, cols], with no gather
// scope. Parameters sharded: collective (every rank calls it at the same point, each with its own ids): the ranks' row
// lists are exchanged and every row of their union is all-reduced from the slices holding its elements (one non-zero
// term per element: the values exactly, except that a stored -0.0 reads as +0.0), so a rank moves rows x cols values in
// place of the whole bucket (this rank's part of them in one gather_rows, the rows across its slice's ends a copy
// each). Replicated: one gather_rows. Either way the seam calls are as many whatever the rows.
void zr_read_rows(zr_runtime *rt, int pid, const int32_t *ids, int64_t n, float *out);
// parameter pid's values when they stay whole on this rank between gathers (parameters replicated: ZeRO 0-2),
// readable without a gather scope; NULL when sharded (ZeRO-3)
const float *zr_resident(const zr_runtime *rt, int pid);
#define zr_param(rt, pid) zr_param_at(rt, pid, __func__)
#define zr_grad(rt, pid) zr_grad_at(rt, pid, __func__)
float *zr_param_at(zr_runtime *rt, int pid, const char *caller);
float *zr_grad_at(zr_runtime *rt, int pid, const char *caller);
// parameter pid as a tensor view (its bucket open): a matrix-product operand (zr_tensor.gemm) of a bucket whose
// bf16 copy holds its current values (zr_set_bf16) is that bf16 copy, anything else its fp32 values (zr_param_at);
// a matrix [shape[0], numel / shape[0]] (row-major, packed), a vector [numel] when it has one dimension
os_tensor zr_tensor_at(zr_runtime *rt, int pid, const char *caller);

// ---- optimizer side (called once per optimizer step, after every micro-batch's backward) ----
// gradients all-reduced (stage 0/1): all-reduce the full gradients (sum over ranks); reduce-scattered (2/3):
// complete the reduce-scatter in flight
void zr_reduce_grads(zr_runtime *rt);
// global gradient L2 norm over trainable buckets (identical on every rank); per_bucket (may be NULL, [nb])
// receives each bucket's global norm (0 for frozen buckets) — gradients are readable per module at any stage
double zr_grad_norm(zr_runtime *rt, double *per_bucket);
// AdamW (PyTorch semantics) on this rank's part with gradients scaled by gscale, then zero the gradients and
// (gather_after_update: stage 1/2) all-gather the updated parameters. step is 1-based. Weight decay skips 1-D tensors
// (biases, norms).
void zr_adamw_step(zr_runtime *rt, float lr, float beta1, float beta2, float eps, float wd, float gscale, int64_t step);
// The first parameter (registry order) of a trainable bucket with a NaN/Inf in its gradient (grads 1, between
// zr_reduce_grads and zr_adamw_step) or its value (grads 0), over every rank's part (collective; the same answer
// on every rank); -1 when all are finite.
int zr_first_nonfinite(zr_runtime *rt, int grads);
// bytes of model state (params, grads, moments) this rank holds permanently
int64_t zr_model_state_bytes(const zr_runtime *rt);
// copy the full values of bucket b into out[numel] on every rank (gathers sharded parameters)
void zr_read_bucket(zr_runtime *rt, int b, float *out);
// copy the reduced gradient of trainable bucket b into out[numel] on every rank (between zr_reduce_grads and
// zr_adamw_step; gathers the slices when reduce-scattered). Collective.
void zr_read_grads(zr_runtime *rt, int b, float *out);
