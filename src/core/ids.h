// Sets of token / row ids as sorted arrays of distinct values.
#pragma once
#include <stdint.h>

// sort a[0..n) ascending and drop repeats in place; returns the number of distinct values
int64_t os_ids_unique(int32_t *a, int64_t n);
// the index of v in the sorted distinct a[0..n), or -1 when absent
int64_t os_ids_find(const int32_t *a, int64_t n, int32_t v);
// ids[0..n) (each >= 0) grouped by value, each group in increasing position: uniq[k] the k-th distinct value
// (ascending), its positions order[start[k]] < .. < order[start[k+1]-1] (start[nu] = n). uniq, start, order: n,
// n + 1 and n entries. Returns nu, the number of distinct values (an embedding's scatter-add as one call per table
// row, each row's sum in the positions' order: kernels.h k_embedding_bwd)
int64_t os_ids_group(const int32_t *ids, int64_t n, int32_t *uniq, int32_t *start, int32_t *order);
