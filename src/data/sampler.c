#include "data/sampler.h"
#include "core/rng.h"

void os_epoch_perm(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch) {
    uint64_t key = os_rng_u64(seed ^ 0x5eed5eedULL, (uint64_t)epoch);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(os_rng_u64(key, (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}
