#include "dataset/sampler.h"
#include "core/rng.h"
#include <math.h>

void os_epoch_perm(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch) {
    uint64_t key = os_rng_u64(seed ^ 0x5eed5eedULL, (uint64_t)epoch);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(os_rng_u64(key, (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

int64_t os_data_take(const os_data_pos *p, int64_t n, int64_t GB) { return p->pos + GB < n ? GB : n - p->pos; }

void os_data_advance(os_data_pos *p, int64_t n, int64_t GB) {
    p->pos += os_data_take(p, n, GB);
    if (p->pos >= n) p->epoch++, p->pos = 0;
}

int64_t os_data_steps(os_data_pos a, os_data_pos b, int64_t n, int64_t GB) {
    if (a.epoch > b.epoch || (a.epoch == b.epoch && a.pos >= b.pos)) return 0;
    if (a.epoch == b.epoch) return (b.pos - a.pos + GB - 1) / GB;
    int64_t per_epoch = (n + GB - 1) / GB;
    return (n - a.pos + GB - 1) / GB + (b.epoch - a.epoch - 1) * per_epoch + (b.pos + GB - 1) / GB;
}

os_data_pos os_data_end(double epochs, int64_t n) {
    double whole = floor(epochs);
    os_data_pos e = {(int64_t)whole, (int64_t)ceil((epochs - whole) * (double)n)};
    if (e.pos >= n) e.epoch++, e.pos = 0;
    return e;
}

int64_t os_data_micro(int64_t pos, int64_t g, int64_t batch, int64_t n, int64_t *first) {
    *first = pos + g * batch;
    return *first >= n ? 0 : n - *first < batch ? n - *first : batch;
}

int64_t os_data_filled(int64_t pos, int64_t count, int64_t batch, int64_t n) {
    int64_t filled = 0;
    for (int64_t g = 0; g < count; g++) filled += pos + g * batch < n;
    return filled;
}
