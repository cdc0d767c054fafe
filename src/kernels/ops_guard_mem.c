// The guard backend's memory (docs/design.md "The guard backend"): buffers mapped PROT_NONE, opened (read and write)
// while a call that is given them runs and closed after (a count per buffer); the strict check (a pointer that is
// not the backend's memory).
#include "kernels/ops_guard_mem.h"
#include "kernels/ops.h"
#include "core/err.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    char *p;
    size_t len;
    int open;   // calls in flight that were given it (it is readable while > 0)
} region;

static region *g_r;   // sorted by address
static int g_n, g_cap;
static int64_t g_held;   // the regions' bytes (whole pages)
static int g_strict = 1;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

void os_guard_set_strict(int on) { g_strict = on; }

static void grow(void **arr, int *cap, int n, size_t esz, const char *what) {
    if (n < *cap) return;
    int c = 2 * *cap + 16;
    void *more = realloc(*arr, esz * (size_t)c);
    if (!more) os_die("guard backend: out of memory for its table of %d %s", c, what);
    *arr = more, *cap = c;
}

// the region holding q (its end counts: an empty range at a buffer's end), or -1
static int find(const void *q) {
    int lo = 0, hi = g_n - 1, at = -1;
    while (lo <= hi) {   // the last region starting at or below q
        int mid = (lo + hi) / 2;
        if (g_r[mid].p <= (const char *)q) at = mid, lo = mid + 1;
        else hi = mid - 1;
    }
    return at >= 0 && (const char *)q <= g_r[at].p + g_r[at].len ? at : -1;
}

static void protect(region *r, int prot) {
    if (mprotect(r->p, r->len, prot)) os_die("guard backend: mprotect of %zu bytes failed", r->len);
}

void *gd_alloc(int64_t bytes, const char *what) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = ((size_t)(bytes > 0 ? bytes : 1) + page - 1) / page * page;
    char *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);   // zero pages
    if (p == MAP_FAILED) os_die("guard backend: out of memory: %zu bytes for %s", len, what);
    pthread_mutex_lock(&g_mu);
    grow((void **)&g_r, &g_cap, g_n, sizeof(region), "buffers");
    int i = g_n;
    while (i > 0 && g_r[i - 1].p > p) g_r[i] = g_r[i - 1], i--;
    g_r[i] = (region){p, len, 0}, g_n++;
    g_held += (int64_t)len;
    pthread_mutex_unlock(&g_mu);
    return p;
}

int64_t gd_held_bytes(void) {
    pthread_mutex_lock(&g_mu);
    int64_t n = g_held;
    pthread_mutex_unlock(&g_mu);
    return n;
}

// ---- one call: its arguments' regions opened, then closed ----
static void open_region(gd_opened *o, int i) {
    if (g_r[i].open++ == 0) protect(&g_r[i], PROT_READ | PROT_WRITE);
    OS_ASSERT(o->n < 2 * GD_MAXPTR);
    o->base[o->n++] = g_r[i].p;
}

// the k-th name of "a, b, c" (for the message)
static void arg_name(const char *names, int k, char *out, size_t n) {
    while (k-- > 0 && names) names = strchr(names, ','), names = names ? names + 1 : NULL;
    if (!names) names = "?";
    names += strspn(names, " ");
    size_t len = strcspn(names, ",");
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), names);
}

void gd_strict(const char *member, const char *names, const void *const *p, int n) {
    if (!g_strict) return;
    pthread_mutex_lock(&g_mu);
    for (int k = 0; k < n; k++)
        if (p[k] && find(p[k]) < 0) {
            char a[64];
            arg_name(names, k, a, sizeof a);
            os_die("guard backend (strict): %s: argument %s (%p) is host memory, not the backend's", member, a, p[k]);
        }
    pthread_mutex_unlock(&g_mu);
}

gd_opened gd_enter(const void *const *p, int n) {
    gd_opened o = {.n = 0};
    pthread_mutex_lock(&g_mu);
    for (int k = 0; k < n; k++) {
        if (!p[k]) continue;
        int i = find(p[k]);
        if (i >= 0) open_region(&o, i);
    }
    pthread_mutex_unlock(&g_mu);
    return o;
}

void gd_leave(const gd_opened *o) {
    pthread_mutex_lock(&g_mu);
    for (int k = 0; k < o->n; k++) {
        int i = find(o->base[k]);
        OS_ASSERT(i >= 0 && g_r[i].open > 0);
        if (--g_r[i].open == 0) protect(&g_r[i], PROT_NONE);
    }
    pthread_mutex_unlock(&g_mu);
}

void gd_unmap(void *p) {
    pthread_mutex_lock(&g_mu);
    int i = find(p);
    if (i < 0 || g_r[i].p != p) os_die("guard backend: free of %p, which it did not allocate", p);
    if (g_r[i].open) os_die("guard backend: free of %p while a call is given it", p);
    munmap(p, g_r[i].len);
    g_held -= (int64_t)g_r[i].len;
    memmove(&g_r[i], &g_r[i + 1], sizeof(region) * (size_t)(g_n - i - 1)), g_n--;
    pthread_mutex_unlock(&g_mu);
}
