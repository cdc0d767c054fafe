// bf16 weights for the products (docs/zero.md "bf16"; zr_set_bf16 in zero/runtime.h turns it on): the matrices
// (zr_tensor.gemm) are rounded once and the rounded copy is bound to the parameters' addresses in the kernels
// (os_k->gemm_bind), so no product rounds them again.
//   replicated parameters (stages 0-2): the bucket's rounded copy, kept and refreshed at the first gather after its
//                                       parameters changed
//   sharded parameters (stage 3):       the bucket gathered in bf16: each rank rounds its slice, the rounded
//                                       slices are all-gathered (2 bytes per element), the fp32 tensors' elements
//                                       (norms, biases) gathered exactly in a second, small all-gather
// Each call works on one bucket's state (zero/bucket_state.h): b indexes the registry r, rank of nranks.
#pragma once
#include "zero/bucket_state.h"
#include "zero/registry.h"
#include <stdint.h>

// what the bf16 gather needs to know of bucket b (has_gemm, nx), from the registry
void zr_bf16_describe(zr_bucket_state *k, const zr_registry *r, int b, int nranks);
// the bucket's parameter values changed: its rounded copy is out of date (replicated 1: unbound if it was bound)
void zr_bf16_params_changed(zr_bucket_state *k, int replicated);
// replicated parameters: the rounded copy of k->full up to date and bound (a no-op when it is)
void zr_bf16_keep_rounded(zr_bucket_state *k);
// sharded parameters: start the all-gathers of bucket b in bf16 into k->rw (and k->full's fp32 tensors); returns
// the bytes of gathered buffers it allocated, adds the bytes this rank will receive to *received
int64_t zr_bf16_gather_start(zr_bucket_state *k, const zr_registry *r, int b, int rank, int nranks,
                             int64_t *received);
// wait for them, unpack the fp32 tensors into k->full and bind k->rw to it; returns the bytes of gathered buffers
// it freed
int64_t zr_bf16_gather_finish(zr_bucket_state *k, const zr_registry *r, int b, int nranks);
// sharded parameters: drop the bf16-gathered copy (unbound); returns the bytes freed
int64_t zr_bf16_drop(zr_bucket_state *k);
