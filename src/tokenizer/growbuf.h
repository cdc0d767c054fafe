// A growable byte buffer on os_alloc (capacity doubles), for the scratch space of the tokenizer.
#pragma once
#include "core/alloc.h"
#include <string.h>

typedef struct {
    void *p;
    size_t cap;   // bytes
} os_growbuf;

// make room for at least `bytes` bytes, keeping the first `keep` bytes; returns the (possibly new) data
static inline void *os_gb_reserve(os_growbuf *b, size_t bytes, size_t keep, const char *what) {
    if (bytes <= b->cap) return b->p;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < bytes) cap *= 2;
    void *p = os_alloc(cap, what);
    if (keep) memcpy(p, b->p, keep);
    os_free(b->p);
    b->p = p;
    b->cap = cap;
    return p;
}

static inline void os_gb_free(os_growbuf *b) {
    os_free(b->p);
    b->p = NULL;
    b->cap = 0;
}
