// Aligned, zeroed allocation that stops with a message (bytes requested, what for) when memory runs out,
// and a process-wide count of live bytes used by the memory accounting.
// Blocks of OS_POOL_MIN bytes or more come from a pool of page ranges that keeps what is freed and hands it to the
// next large allocation (best fit, cut to size, neighbours merged again when freed), so the buffers that a training
// step allocates and frees every micro-batch (gathered buckets, gradient buckets, slices) are not faulted in and
// cleared by the kernel each time. Bound: the pool's pages plus the small live blocks never exceed the most that
// plain allocation would have held at once so far (os_alloc_peak_bytes in pages); a large allocation that finds no
// free range unmaps free ranges first where needed (docs/zero.md "Buffer lifetimes and the pool").
#pragma once
#include <stddef.h>
#include <stdint.h>

#define OS_POOL_MIN ((size_t)1 << 20)

void *os_alloc(size_t bytes, const char *what);   // 64-byte aligned, zero-filled; never returns NULL
// as os_alloc, but the contents are unspecified (a reused range is not cleared): only for a buffer the caller
// overwrites entirely before reading it. Under AddressSanitizer it is filled with 0xFF bytes (NaN as floats; small
// blocks too), so a caller that relied on zeros shows it in the sanitizer build's tests.
void *os_alloc_uninit(size_t bytes, const char *what);
// as os_alloc, but never from the pool's pages: new zero pages that take memory only where written, for a buffer
// mostly left unwritten (bf16's fp32 gathered bucket: only its fp32 tensors are written). Outside the pool's bound.
void *os_alloc_lazy(size_t bytes, const char *what);
void os_free(void *p);                             // NULL is fine
// The pool's huge-page setting (OMNISHARD_HUGEPAGES, docs/operations.md): 1 its new mappings ask for transparent
// huge pages (unset or 1), 0 they do not (0); -1 + message for any other value.
int os_alloc_huge_pages(void);
int64_t os_alloc_live_bytes(void);                 // bytes currently allocated through os_alloc
int64_t os_alloc_peak_bytes(void);
int64_t os_peak_rss_bytes(void);                   // VmHWM of this process

typedef struct {
    int64_t held;      // bytes mapped by the pool (live large blocks and free ranges)
    int64_t free;      // of which free (kept for reuse)
    int64_t bound;     // most bytes the pool may hold now (the peak of plain allocation, less the small live blocks)
    int64_t reused;    // large allocations served from a free range
    int64_t fresh;     // large allocations that mapped new pages
    int64_t mapped;    // bytes of new pages mapped for large allocations, in all
    int64_t unmapped;  // bytes of free ranges given back to the kernel to stay within the bound
} os_pool_stats;
os_pool_stats os_alloc_pool_stats(void);
