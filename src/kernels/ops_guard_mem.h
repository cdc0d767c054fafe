// The guard backend's memory (ops_guard_mem.c; the backend: ops_guard.c, its queue: ops_guard_queue.c).
#pragma once
#include <stdint.h>

enum { GD_MAXPTR = 16 };   // pointer arguments of one member at most (attention_bwd: 11)

// buffers mapped PROT_NONE (zero pages; what: named in the out-of-memory message), unmapped (the queue run first)
void *gd_alloc(int64_t bytes, const char *what);
void gd_unmap(void *p);
// the bytes mapped for the live buffers (each rounded up to whole pages, as the guard maps it)
int64_t gd_held_bytes(void);

// the buffers a call opened (closed again by gd_leave)
typedef struct {
    char *base[GD_MAXPTR];
    int n;
} gd_opened;

// strict: stops naming the member and the argument (names: "a, b, c", the pointers' names) when p[k] is not the
// backend's memory (NULL passes: an optional argument)
void gd_strict(const char *member, const char *names, const void *const *p, int n);
// opens the buffers holding p[0..n) for a call
gd_opened gd_enter(const void *const *p, int n);
void gd_leave(const gd_opened *o);
