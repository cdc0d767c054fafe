#include "core/ids.h"
#include "core/alloc.h"
#include <stdlib.h>

static int cmp_i32(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

int64_t os_ids_unique(int32_t *a, int64_t n) {
    if (n <= 0) return 0;
    qsort(a, (size_t)n, sizeof *a, cmp_i32);
    int64_t k = 1;
    for (int64_t i = 1; i < n; i++)
        if (a[i] != a[k - 1]) a[k++] = a[i];
    return k;
}

int64_t os_ids_find(const int32_t *a, int64_t n, int32_t v) {
    int64_t lo = 0, hi = n;   // a[lo..hi) may hold v
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && a[lo] == v ? lo : -1;
}

static int cmp_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

int64_t os_ids_group(const int32_t *ids, int64_t n, int32_t *uniq, int32_t *start, int32_t *order) {
    uint64_t *key = os_alloc(sizeof(uint64_t) * (size_t)(n ? n : 1), "grouped ids");   // (value, position): distinct
    for (int64_t i = 0; i < n; i++) key[i] = (uint64_t)(uint32_t)ids[i] << 32 | (uint64_t)i;
    qsort(key, (size_t)n, sizeof *key, cmp_u64);
    int64_t nu = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t v = (int32_t)(key[i] >> 32);
        if (!nu || uniq[nu - 1] != v) uniq[nu] = v, start[nu++] = (int32_t)i;
        order[i] = (int32_t)(key[i] & 0xffffffffu);
    }
    start[nu] = (int32_t)n;
    os_free(key);
    return nu;
}
