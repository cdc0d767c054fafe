// Sets of token / row ids as sorted arrays of distinct values.
#pragma once
#include <stdint.h>

// sort a[0..n) ascending and drop repeats in place; returns the number of distinct values
int64_t os_ids_unique(int32_t *a, int64_t n);
// the index of v in the sorted distinct a[0..n), or -1 when absent
int64_t os_ids_find(const int32_t *a, int64_t n, int32_t v);
