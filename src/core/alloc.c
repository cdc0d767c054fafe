#include "core/alloc.h"
#include "core/err.h"
#include "core/knobs.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
enum { ASAN = 1 };
#else
enum { ASAN = 0 };
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

// Every block: [... | size_t bytes | void *base | data (64-byte aligned) ...]; bytes decides the kind on free, and a
// large block's base (page-aligned) has its lowest bit set when it is os_alloc_lazy's (never pooled).
// Small blocks (< OS_POOL_MIN): calloc, not posix_memalign + memset: memory fresh from the kernel is already zero
// and glibc does not clear it again. Large blocks: a page range of the pool, data at base + ALIGN, the range
// need(bytes) long.
enum { ALIGN = 64, META = sizeof(size_t) + sizeof(void *) };
static _Atomic int64_t g_live, g_peak;

static void count(size_t bytes) {
    int64_t live = atomic_fetch_add(&g_live, (int64_t)bytes) + (int64_t)bytes;
    int64_t peak = atomic_load(&g_peak);
    while (live > peak && !atomic_compare_exchange_weak(&g_peak, &peak, live)) {}
}

static void *finish(char *base, char *p, size_t bytes) {
    memcpy(p - META, &bytes, sizeof bytes);
    memcpy(p - sizeof(void *), &base, sizeof base);
    return p;
}

// ---- the pool of large blocks ----
// Free ranges sorted by address, adjacent ones merged. The bound: pool pages (held) + small live bytes <= the peak
// so far of what plain allocation holds (small live bytes + each live large block's own pages: `base`).
typedef struct {
    char *p;
    size_t len;
} range;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static range *g_free;
static int g_nfree, g_capfree;
static _Atomic int64_t g_held;        // pool pages: live large blocks + free ranges
static _Atomic int64_t g_big_req;     // bytes requested by the live large blocks
static _Atomic int64_t g_big_pages;   // their pages
static _Atomic int64_t g_base_peak;   // peak of (small live bytes + g_big_pages)
static _Atomic int64_t g_lazy;        // bytes of live os_alloc_lazy blocks (outside the bound)
static int64_t g_free_bytes, g_reused, g_fresh, g_unmapped, g_mapped;

static size_t page_size(void) {
    static size_t ps;
    if (!ps) ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}
static size_t need_of(size_t bytes) {
    size_t ps = page_size();
    return (bytes + ALIGN + ps - 1) / ps * ps;
}
static int64_t small_live(void) { return atomic_load(&g_live) - atomic_load(&g_big_req) - atomic_load(&g_lazy); }

static void note_base(void) {
    int64_t base = small_live() + atomic_load(&g_big_pages), peak = atomic_load(&g_base_peak);
    while (base > peak && !atomic_compare_exchange_weak(&g_base_peak, &peak, base)) {}
}

static void unmap(char *p, size_t len) {
    ASAN_UNPOISON_MEMORY_REGION(p, len);   // the shadow of pages the kernel may map here again
    munmap(p, len);
    g_unmapped += (int64_t)len;
    atomic_fetch_sub(&g_held, (int64_t)len);
    g_free_bytes -= (int64_t)len;
}

static void drop_range(int i) {
    memmove(g_free + i, g_free + i + 1, sizeof *g_free * (size_t)(g_nfree - i - 1));
    g_nfree--;
}

// give back at least `over` bytes of free ranges to the kernel, smallest ranges first, the last one cut from its end
// (caller holds g_mu)
static void evict(int64_t over) {
    size_t ps = page_size();
    while (over > 0 && g_nfree > 0) {
        int s = 0;
        for (int i = 1; i < g_nfree; i++)
            if (g_free[i].len < g_free[s].len) s = i;
        size_t cut = ((size_t)over + ps - 1) / ps * ps;
        if (cut >= g_free[s].len) {
            over -= (int64_t)g_free[s].len;
            unmap(g_free[s].p, g_free[s].len);
            drop_range(s);
        } else {
            g_free[s].len -= cut;
            unmap(g_free[s].p + g_free[s].len, cut);
            over -= (int64_t)cut;
        }
    }
}

// keep pool pages + small live bytes within the peak of plain allocation (caller holds g_mu)
static void enforce_bound(int64_t extra) {
    int64_t over = atomic_load(&g_held) + extra + small_live() - atomic_load(&g_base_peak);
    if (over > 0) evict(over);
}

static void insert_free(char *p, size_t len) {
    ASAN_POISON_MEMORY_REGION(p, len);
    int i = 0;
    while (i < g_nfree && g_free[i].p < p) i++;
    g_free_bytes += (int64_t)len;   // (unmap below takes it off again)
    if (i > 0 && g_free[i - 1].p + g_free[i - 1].len == p) {   // merge with the range before
        g_free[i - 1].len += len;
        if (i < g_nfree && g_free[i - 1].p + g_free[i - 1].len == g_free[i].p) g_free[i - 1].len += g_free[i].len, drop_range(i);
        return;
    }
    if (i < g_nfree && p + len == g_free[i].p) {               // with the range after
        g_free[i].p = p, g_free[i].len += len;
        return;
    }
    if (g_nfree == g_capfree) {
        int cap = g_capfree ? 2 * g_capfree : 64;
        range *t = realloc(g_free, sizeof *t * (size_t)cap);
        if (!t) {   // no room to remember it: give it back
            unmap(p, len);
            return;
        }
        g_free = t, g_capfree = cap;
    }
    memmove(g_free + i + 1, g_free + i, sizeof *g_free * (size_t)(g_nfree - i));
    g_free[i] = (range){p, len};
    g_nfree++;
}

// the smallest free range of at least len bytes, its first len bytes taken; NULL when none
static char *take_best_fit(size_t len) {
    int best = -1;
    for (int i = 0; i < g_nfree; i++)
        if (g_free[i].len >= len && (best < 0 || g_free[i].len < g_free[best].len)) best = i;
    if (best < 0) return NULL;
    char *p = g_free[best].p;
    g_free[best].p += len, g_free[best].len -= len;
    if (!g_free[best].len) drop_range(best);
    g_free_bytes -= (int64_t)len;
    return p;
}

// Transparent huge pages for the pool's new mappings (MADV_HUGEPAGE; used where the system's THP setting,
// /sys/kernel/mm/transparent_hugepage/enabled, is "madvise" or "always"): a buffer is faulted in 2 MiB at a time
// instead of 4 KiB, and the walks over the buckets miss the TLB far less (docs/zero.md "Huge pages").
// OMNISHARD_HUGEPAGES=0 (core/knobs.h) leaves the pool to the system's default; 1 or unset asks for them. A bad
// value stops every command at start (main); a program without main stops at its first large block.
int os_alloc_huge_pages(void) { return os_knobs_check() < 0 ? -1 : os_knobs()->hugepages; }

static void want_huge(char *p, size_t len) {   // advice only: where THP is off the kernel ignores or refuses it
    if (os_knobs()->hugepages) (void)madvise(p, len, MADV_HUGEPAGE);
}

// A request no free range fits: a new mapping of len bytes whose pages are, as far as the free ranges reach, moved
// there from them (mremap moves page-table entries: no copy, no fault, no clearing), largest ranges first; the rest
// is fresh. Bytes moved, or -1 when no mapping could be made. Each move may split a mapping in two; the number of
// moves in the process's life is capped (the kernel limits mappings per process, vm.max_map_count: 65530 by
// default), after which free ranges are unmapped and the request mapped fresh.
enum { MAX_MOVES = 4096 };
static int g_moves;

static int64_t assemble(char **out, size_t len) {
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return -1;
    want_huge(base, len);   // the part left fresh; moved pages keep their own mapping's advice
    size_t off = 0;
    while (off < len && g_nfree > 0 && g_moves < MAX_MOVES) {
        int big = 0;
        for (int i = 1; i < g_nfree; i++)
            if (g_free[i].len > g_free[big].len) big = i;
        size_t piece = g_free[big].len < len - off ? g_free[big].len : len - off;
        ASAN_UNPOISON_MEMORY_REGION(g_free[big].p, piece);
        if (mremap(g_free[big].p, piece, piece, MREMAP_MAYMOVE | MREMAP_FIXED, base + off) == MAP_FAILED) {
            ASAN_POISON_MEMORY_REGION(g_free[big].p, piece);
            break;
        }
        g_moves++;
        g_free[big].p += piece, g_free[big].len -= piece;
        if (!g_free[big].len) drop_range(big);
        g_free_bytes -= (int64_t)piece;
        off += piece;
    }
    atomic_fetch_add(&g_held, (int64_t)(len - off));
    g_mapped += (int64_t)(len - off);
    *out = base;
    return (int64_t)off;
}

static void *pool_alloc(size_t bytes, int zero, const char *what) {
    size_t len = need_of(bytes);
    if (os_alloc_huge_pages() < 0) os_die_err();   // before the lock: exit handlers may free
    pthread_mutex_lock(&g_mu);
    atomic_fetch_add(&g_big_req, (int64_t)bytes);
    atomic_fetch_add(&g_big_pages, (int64_t)len);
    count(bytes);
    note_base();
    char *base = take_best_fit(len);
    int reused = base != NULL;
    if (!reused && g_nfree > 0 && g_moves < MAX_MOVES) {   // pages of the free ranges, moved together
        int64_t moved = assemble(&base, len);
        reused = moved > 0;
        if (moved < 0) base = NULL;
        else if (moved < (int64_t)len) g_fresh++, enforce_bound(0);
    }
    if (reused) {
        g_reused++;
    } else if (!base) {
        enforce_bound((int64_t)len);
        base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED && g_nfree) {   // free ranges kept for reuse: give them all back and try again
            evict(INT64_MAX);
            base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        }
        if (base == MAP_FAILED) {
            pthread_mutex_unlock(&g_mu);
            os_die("out of memory: cannot allocate %zu bytes for %s", bytes, what ? what : "?");
        }
        want_huge(base, len);
        atomic_fetch_add(&g_held, (int64_t)len);
        g_mapped += (int64_t)len;
        g_fresh++;
    }
    pthread_mutex_unlock(&g_mu);
    char *p = base + ALIGN;
    ASAN_UNPOISON_MEMORY_REGION(base, ALIGN + bytes);
    ASAN_POISON_MEMORY_REGION(p + bytes, len - ALIGN - bytes);   // overflows past the block are still caught
    if (ASAN && !zero) memset(p, 0xFF, bytes);
    else if (reused && zero) memset(p, 0, bytes);
    return finish(base, p, bytes);
}

static void pool_free(char *base, size_t bytes) {
    size_t len = need_of(bytes);
    pthread_mutex_lock(&g_mu);
    atomic_fetch_sub(&g_big_req, (int64_t)bytes);
    atomic_fetch_sub(&g_big_pages, (int64_t)len);
    atomic_fetch_sub(&g_live, (int64_t)bytes);
    insert_free(base, len);
    pthread_mutex_unlock(&g_mu);
}

static void *alloc(size_t bytes, int zero, const char *what) {
    if (bytes >= OS_POOL_MIN) return pool_alloc(bytes, zero, what);
    char *raw = calloc(1, bytes + META + ALIGN);
    if (!raw) os_die("out of memory: cannot allocate %zu bytes for %s", bytes, what ? what : "?");
    char *p = (char *)(((uintptr_t)raw + META + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    finish(raw, p, bytes);
    if (ASAN && !zero) memset(p, 0xFF, bytes);   // as for large blocks: reliance on zeros shows in the tests
    count(bytes);
    note_base();
    // a small block can take the last room under the bound: free ranges make way (cheap check first)
    if (atomic_load(&g_held) - atomic_load(&g_big_pages) > 0 &&
        atomic_load(&g_held) + small_live() > atomic_load(&g_base_peak)) {
        pthread_mutex_lock(&g_mu);
        enforce_bound(0);
        pthread_mutex_unlock(&g_mu);
    }
    return p;
}

void *os_alloc(size_t bytes, const char *what) { return alloc(bytes, 1, what); }

void *os_alloc_lazy(size_t bytes, const char *what) {
    if (bytes < OS_POOL_MIN) return alloc(bytes, 1, what);
    size_t len = need_of(bytes);
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) os_die("out of memory: cannot allocate %zu bytes for %s", bytes, what ? what : "?");
    atomic_fetch_add(&g_lazy, (int64_t)bytes);
    count(bytes);
    return finish(base + 1, base + ALIGN, bytes);
}
void *os_alloc_uninit(size_t bytes, const char *what) { return alloc(bytes, 0, what); }

void os_free(void *p) {
    if (!p) return;
    size_t bytes;
    char *base;
    memcpy(&bytes, (char *)p - META, sizeof bytes);
    memcpy(&base, (char *)p - sizeof(void *), sizeof base);
    if (bytes >= OS_POOL_MIN && ((uintptr_t)base & 1)) {   // os_alloc_lazy's: straight back to the kernel
        munmap(base - 1, need_of(bytes));
        atomic_fetch_sub(&g_lazy, (int64_t)bytes);
        atomic_fetch_sub(&g_live, (int64_t)bytes);
        return;
    }
    if (bytes >= OS_POOL_MIN) {
        pool_free(base, bytes);
        return;
    }
    atomic_fetch_sub(&g_live, (int64_t)bytes);
    free(base);
}

int64_t os_alloc_live_bytes(void) { return atomic_load(&g_live); }
int64_t os_alloc_peak_bytes(void) { return atomic_load(&g_peak); }

os_pool_stats os_alloc_pool_stats(void) {
    pthread_mutex_lock(&g_mu);
    os_pool_stats s = {atomic_load(&g_held), g_free_bytes, atomic_load(&g_base_peak) - small_live(), g_reused,
                       g_fresh, g_mapped, g_unmapped};
    pthread_mutex_unlock(&g_mu);
    return s;
}

int64_t os_peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}
