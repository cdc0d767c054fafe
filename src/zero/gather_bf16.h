// bf16 weights for the products (docs/zero.md "bf16"; zr_set_bf16 in zero/runtime.h turns it on): the matrices
// (zr_tensor.gemm) are rounded once into a bf16 copy of the bucket (k->rw, 2 bytes per element), which the products
// read as bf16 tensors (zr_tensor_view), so no product rounds them again.
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
// the bucket's parameter values changed: its rounded copy is out of date
void zr_bf16_params_changed(zr_bucket_state *k);
// replicated parameters: the rounded copy of k->full up to date (a no-op when it is)
void zr_bf16_keep_rounded(zr_bucket_state *k);
// the bucket's rounded copy [padded] (bf16 bits) where it holds the current values (sharded 1: gathered in bf16
// for this scope; 0: kept and up to date), else NULL
const uint16_t *zr_bf16_rounded(const zr_bucket_state *k, int sharded);
// sharded parameters: start the all-gathers of bucket b in bf16 into k->rw (and k->full's fp32 tensors); returns
// the bytes of gathered buffers it allocated, adds the bytes this rank will receive to *received
int64_t zr_bf16_gather_start(zr_bucket_state *k, const zr_registry *r, int b, int rank, int nranks,
                             int64_t *received);
// wait for them and unpack the fp32 tensors into k->full; returns the bytes of gathered buffers it freed
int64_t zr_bf16_gather_finish(zr_bucket_state *k, const zr_registry *r, int b, int nranks);
// sharded parameters: drop the bf16-gathered copy; returns the bytes freed
int64_t zr_bf16_drop(zr_bucket_state *k);
