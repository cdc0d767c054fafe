// Counter-based random numbers: value i of stream `key` is a pure function of (key, i), so a tensor
// initialised element by element gets the same values on any number of ranks, in any order.
#pragma once
#include <stddef.h>
#include <stdint.h>

// FNV-1a style byte hash (this project's basis constant), continuing from h; start with OS_FNV_BASIS
#define OS_FNV_BASIS 1469598103934665603ULL
uint64_t os_fnv1a(uint64_t h, const void *p, size_t n);
uint64_t os_hash_str(const char *s, uint64_t seed);          // os_fnv1a of s then mixed
uint64_t os_rng_u64(uint64_t key, uint64_t i);               // the i-th 64-bit value of stream key
double os_rng_uniform(uint64_t key, uint64_t i);             // in [0, 1)
double os_rng_normal(uint64_t key, uint64_t i);              // standard normal (Box-Muller on pairs)
// fill dst[0..n) with elements [start, start+n) of the stream: normal(mean, std) or uniform(lo, hi)
void os_rng_fill_normal(float *dst, int64_t n, uint64_t key, int64_t start, float mean, float std);
void os_rng_fill_uniform(float *dst, int64_t n, uint64_t key, int64_t start, float lo, float hi);
