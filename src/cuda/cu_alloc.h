// The CUDA backend's caching allocator (cu_alloc.c): device memory from plain cudaMalloc (never managed memory),
// handed out in size classes of 1/8 of a power of two (at most 12.5% over the request; 512 bytes at least) and
// kept on a free list per class when freed, for the next request of the same class. Reuse is stream-ordered:
// every user of the memory runs on cu_stream(), so work issued after a free runs after the work issued before it.
// When cudaMalloc fails, the free lists are given back (cudaFree) and the request tried once more.
#pragma once
#include <stdint.h>

void *cu_alloc(int64_t bytes, const char *what);   // not zeroed; dies naming what (and the counters) when out of memory
void cu_free(void *p);                             // NULL is fine; dies on a pointer it did not hand out
int64_t cu_alloc_class(int64_t bytes);             // the bytes a request of `bytes` takes (its size class)
typedef struct {
    int64_t requested, peak_requested;   // bytes asked for by the live blocks
    int64_t in_use, peak_in_use;      // class bytes handed out
    int64_t reserved, peak_reserved;  // bytes held from cudaMalloc (handed out + on the free lists)
    int64_t device_used_peak;         // cudaMemGetInfo's total - free at its highest, read after each cudaMalloc
    int64_t device_total;
} cu_mem_stats;
cu_mem_stats cu_alloc_stats(void);
