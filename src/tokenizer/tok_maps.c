// Hash maps of the tokenizer: token text -> id and (left, right) pair -> merge.
#include "tokenizer/tok_internal.h"
#include "core/alloc.h"
#include <string.h>

static uint64_t table_size(int64_t n_max) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n_max * 2) cap *= 2;   // load factor <= 0.5
    return cap;
}

void os_tok_strmap_init(os_tok_strmap *m, int64_t n_max) {
    uint64_t cap = table_size(n_max);
    m->slots = os_alloc(cap * sizeof *m->slots, "tokenizer name table");
    m->mask = cap - 1;
}

void os_tok_strmap_put(os_tok_strmap *m, const char *s, uint32_t len, int32_t id) {
    for (uint64_t i = os_tok_hash(s, len) & m->mask;; i = (i + 1) & m->mask) {
        os_tok_strslot *e = &m->slots[i];
        if (!e->s || (e->len == len && !memcmp(e->s, s, len))) {
            e->s = s;
            e->len = len;
            e->id = id;
            return;
        }
    }
}

int32_t os_tok_strmap_get(const os_tok_strmap *m, const char *s, uint32_t len) {
    for (uint64_t i = os_tok_hash(s, len) & m->mask;; i = (i + 1) & m->mask) {
        const os_tok_strslot *e = &m->slots[i];
        if (!e->s) return -1;
        if (e->len == len && !memcmp(e->s, s, len)) return e->id;
    }
}

void os_tok_pairmap_init(os_tok_pairmap *m, int64_t n_max) {
    uint64_t cap = table_size(n_max);
    m->keys = os_alloc(cap * sizeof *m->keys, "tokenizer merge keys");
    m->vals = os_alloc(cap * sizeof *m->vals, "tokenizer merge values");
    memset(m->keys, 0xFF, cap * sizeof *m->keys);
    m->mask = cap - 1;
}

int os_tok_pairmap_put(os_tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == key || m->keys[i] == ~0ull) {
            int had = m->keys[i] == key;
            m->keys[i] = key;
            m->vals[i] = (uint64_t)(uint32_t)rank << 32 | (uint32_t)id;
            return had;
        }
    }
}
