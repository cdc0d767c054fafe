#include "core/ids.h"
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
