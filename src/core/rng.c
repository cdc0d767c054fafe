#include "core/rng.h"
#include <math.h>
#include <string.h>

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t os_fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

uint64_t os_hash_str(const char *s, uint64_t seed) { return mix64(os_fnv1a(OS_FNV_BASIS ^ seed, s, strlen(s))); }

uint64_t os_rng_u64(uint64_t key, uint64_t i) { return mix64(mix64(key) + (i + 1) * 0x9e3779b97f4a7c15ULL); }

double os_rng_uniform(uint64_t key, uint64_t i) { return (double)(os_rng_u64(key, i) >> 11) * 0x1.0p-53; }

double os_rng_normal(uint64_t key, uint64_t i) {
    uint64_t pair = i / 2;
    double u1 = 1.0 - os_rng_uniform(key, 2 * pair), u2 = os_rng_uniform(key, 2 * pair + 1);
    double r = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
    return (i & 1) ? r * sin(th) : r * cos(th);
}

void os_rng_fill_normal(float *dst, int64_t n, uint64_t key, int64_t start, float mean, float std) {
    for (int64_t j = 0; j < n; j++) dst[j] = mean + std * (float)os_rng_normal(key, (uint64_t)(start + j));
}

void os_rng_fill_uniform(float *dst, int64_t n, uint64_t key, int64_t start, float lo, float hi) {
    for (int64_t j = 0; j < n; j++) dst[j] = lo + (hi - lo) * (float)os_rng_uniform(key, (uint64_t)(start + j));
}
