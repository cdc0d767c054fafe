// Binary search in a table of sorted, disjoint code point ranges (the generated Unicode tables): records of
// `stride` bytes that each begin with uint32_t first, last (inclusive), e.g. os_nfc_ccc_range, os_gc_stand_in.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// the index of the record whose [first, last] holds c among base[0 .. n), or -1 when none does
static inline int os_cp_range_find(const void *base, int n, size_t stride, uint32_t c) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        uint32_t r[2];   // first, last (read by bytes: the records are of different types)
        memcpy(r, (const char *)base + (size_t)mid * stride, sizeof r);
        if (c < r[0]) hi = mid - 1;
        else if (c > r[1]) lo = mid + 1;
        else return mid;
    }
    return -1;
}
