// Operands rounded ahead by their owner (the ZeRO runtime's bf16 copies of its buckets, docs/zero.md "bf16"): the
// ranges w[n] bound to their rounded copies, and the lookup of an operand lying inside one. Shared by the CPU's
// bf16 products (gemm_bf16.c, k_gemm_bf16_bind) and the CUDA backend's (cuda/cu_gemm.c); a few dozen buckets,
// searched in order.
#pragma once
#include <stdint.h>

typedef struct {
    const float *w;
    int64_t n;
    const void *r;   // w's rounded copy, element for element
} k_binding;
typedef struct {
    k_binding *b;
    int n, cap;
} k_binds;

// w[n] bound to rounded (binding w again replaces its copy); w's binding removed (none: nothing)
void k_binds_set(k_binds *t, const float *w, int64_t n, const void *rounded);
void k_binds_drop(k_binds *t, const float *w);
// the rounded copy of operand src [rows, cols] (row stride ld) inside a bound range, at the same element offset
// (so with the same row stride; esz bytes an element); NULL when none holds all of it
const void *k_binds_find(const k_binds *t, const float *src, int64_t rows, int64_t cols, int64_t ld, int esz);
