// Byte-level BPE of one pre-tokenized piece: start from the byte tokens and repeatedly merge the adjacent pair of
// lowest merge rank (leftmost on ties) until no pair has a merge. Short pieces use a scan over a pair-rank array,
// long ones a min-heap of (rank, position) over a linked list. A cache maps recently seen pieces to their ids.
#include "core/alloc.h"
#include "tokenizer/tok_internal.h"
#include <string.h>

#define NO_RANK INT32_MAX
#define SCAN_MAX 64                 // pieces up to this many bytes use the scan
#define CACHE_SLOTS (1u << 16)      // open addressing; cleared when half full
#define CACHE_ARENA (4u << 20)      // key bytes and ids of the cached pieces; cleared when full
#define CACHE_MAX_PIECE 255         // longer pieces are not cached

typedef struct {
    uint64_t hash;
    uint32_t off;          // in arena: ids (int32) then key bytes
    uint16_t len, nids;    // len == 0: empty slot
} cache_slot;

struct os_tok_cache {
    cache_slot *slots;
    unsigned char *arena;
    uint32_t used, n;
};

os_tok_cache *os_tok_cache_new(void) {
    os_tok_cache *c = os_alloc(sizeof *c, "BPE cache");
    c->slots = os_alloc(CACHE_SLOTS * sizeof *c->slots, "BPE cache slots");
    c->arena = os_alloc(CACHE_ARENA, "BPE cache arena");
    return c;
}

void os_tok_cache_free(os_tok_cache *c) {
    if (!c) return;
    os_free(c->slots);
    os_free(c->arena);
    os_free(c);
}

// ids of piece in the cache (copied into out, count returned), or -1
static int cache_get(os_tok_cache *c, uint64_t h, const unsigned char *p, size_t n, int32_t *out) {
    for (uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        const cache_slot *s = &c->slots[i];
        if (!s->len) return -1;
        if (s->hash == h && s->len == n && !memcmp(c->arena + s->off + 4u * s->nids, p, n)) {
            memcpy(out, c->arena + s->off, 4u * s->nids);
            return s->nids;
        }
    }
}

static void cache_put(os_tok_cache *c, uint64_t h, const unsigned char *p, size_t n, const int32_t *ids, int nids) {
    uint32_t need = (uint32_t)(4 * nids + n + 3) & ~3u;
    if (c->n >= CACHE_SLOTS / 2 || c->used + need > CACHE_ARENA) {
        memset(c->slots, 0, CACHE_SLOTS * sizeof *c->slots);
        c->used = c->n = 0;
    }
    uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);
    while (c->slots[i].len) i = (i + 1) & (CACHE_SLOTS - 1);
    memcpy(c->arena + c->used, ids, 4u * (uint32_t)nids);
    memcpy(c->arena + c->used + 4u * (uint32_t)nids, p, n);
    c->slots[i] = (cache_slot){.hash = h, .off = c->used, .len = (uint16_t)n, .nids = (uint16_t)nids};
    c->used += need;
    c->n++;
}

static inline int32_t pair_rank(const os_tokenizer *t, int32_t a, int32_t b, int32_t *merged) {
    int32_t rank;
    return os_tok_pairmap_get(&t->merges, a, b, &rank, merged) ? rank : NO_RANK;
}

// BPE over sym[0..m) in place; returns the new count. rank/mid are scratch of m entries.
static int bpe_scan(const os_tokenizer *t, int32_t *sym, int m, int32_t *rank, int32_t *mid) {
    for (int i = 0; i + 1 < m; i++) rank[i] = pair_rank(t, sym[i], sym[i + 1], &mid[i]);
    while (m > 1) {
        int best = 0;
        for (int i = 1; i + 1 < m; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == NO_RANK) break;
        sym[best] = mid[best];
        m--;
        memmove(sym + best + 1, sym + best + 2, (size_t)(m - best - 1) * sizeof *sym);
        memmove(rank + best + 1, rank + best + 2, (size_t)(m - best - 2 > 0 ? m - best - 2 : 0) * sizeof *rank);
        memmove(mid + best + 1, mid + best + 2, (size_t)(m - best - 2 > 0 ? m - best - 2 : 0) * sizeof *mid);
        if (best > 0) rank[best - 1] = pair_rank(t, sym[best - 1], sym[best], &mid[best - 1]);
        if (best + 1 < m) rank[best] = pair_rank(t, sym[best], sym[best + 1], &mid[best]);
    }
    return m;
}

typedef struct {
    int32_t rank, pos, a, b;
} heap_entry;

static inline int heap_less(const heap_entry *x, const heap_entry *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

static void heap_push(heap_entry *h, int *n, heap_entry e) {
    int i = (*n)++;
    while (i > 0 && heap_less(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static heap_entry heap_pop(heap_entry *h, int *n) {
    heap_entry top = h[0], last = h[--*n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static void heap_add_pair(const os_tokenizer *t, heap_entry *h, int *nh, const int32_t *sym, int p, int q) {
    int32_t merged = 0, r = pair_rank(t, sym[p], sym[q], &merged);
    if (r != NO_RANK) heap_push(h, nh, (heap_entry){r, p, sym[p], sym[q]});
}

// BPE over sym[0..m) for long pieces; returns the new count (sym compacted in place)
static int bpe_heap(const os_tokenizer *t, int32_t *sym, int m) {
    int32_t *next = os_alloc((size_t)m * sizeof(int32_t), "BPE links");
    int32_t *prev = os_alloc((size_t)m * sizeof(int32_t), "BPE links");
    heap_entry *h = os_alloc((size_t)(2 * m + 1) * sizeof *h, "BPE heap");   // m-1 pairs + 2 per merge
    int nh = 0;
    for (int i = 0; i < m; i++) {
        next[i] = i + 1 < m ? i + 1 : -1;
        prev[i] = i - 1;
    }
    for (int i = 0; i + 1 < m; i++) heap_add_pair(t, h, &nh, sym, i, i + 1);
    while (nh) {
        heap_entry e = heap_pop(h, &nh);
        int p = e.pos, q = next[p];
        if (sym[p] != e.a || q < 0 || sym[q] != e.b) continue;   // stale
        int32_t merged = 0;
        pair_rank(t, e.a, e.b, &merged);
        sym[p] = merged;
        sym[q] = -1;
        next[p] = next[q];
        if (next[q] >= 0) prev[next[q]] = p;
        if (prev[p] >= 0) heap_add_pair(t, h, &nh, sym, prev[p], p);
        if (next[p] >= 0) heap_add_pair(t, h, &nh, sym, p, next[p]);
    }
    int k = 0;
    for (int i = 0; i >= 0; i = next[i]) sym[k++] = sym[i];
    os_free(next);
    os_free(prev);
    os_free(h);
    return k;
}

void os_tok_bpe(os_tokenizer *t, const unsigned char *p, size_t n, os_growbuf *ids, int64_t *nids) {
    int32_t *out = os_gb_reserve(ids, (size_t)(*nids + (int64_t)n) * sizeof(int32_t), (size_t)*nids * sizeof(int32_t),
                                 "token ids");
    out += *nids;
    if (n == 1) {
        if (t->byte_id[p[0]] >= 0) {
            out[0] = t->byte_id[p[0]];
            (*nids)++;
        }
        return;
    }
    int cacheable = n <= CACHE_MAX_PIECE;
    uint64_t h = cacheable ? os_tok_hash(p, n) : 0;
    if (cacheable && pthread_mutex_trylock(&t->cache_lock) == 0) {
        int k = cache_get(t->cache, h, p, n, out);
        pthread_mutex_unlock(&t->cache_lock);
        if (k >= 0) {
            *nids += k;
            return;
        }
    }
    int m = 0;
    for (size_t i = 0; i < n; i++)
        if (t->byte_id[p[i]] >= 0) out[m++] = t->byte_id[p[i]];   // no token for a byte: dropped, as with HF
    if (n <= SCAN_MAX) {
        int32_t rank[SCAN_MAX], mid[SCAN_MAX];
        m = bpe_scan(t, out, m, rank, mid);
    } else if (m > 1) {
        m = bpe_heap(t, out, m);
    }
    if (cacheable && pthread_mutex_trylock(&t->cache_lock) == 0) {
        cache_put(t->cache, h, p, n, out, m);
        pthread_mutex_unlock(&t->cache_lock);
    }
    *nids += m;
}
