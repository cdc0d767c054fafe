#include "core/alloc.h"
#include "core/err.h"
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

#define HDR 64
static _Atomic int64_t g_live, g_peak;

void *os_alloc(size_t bytes, const char *what) {
    void *raw = NULL;
    if (posix_memalign(&raw, 64, bytes + HDR) != 0 || !raw)
        os_die("out of memory: cannot allocate %zu bytes for %s", bytes, what ? what : "?");
    memset(raw, 0, bytes + HDR);
    *(size_t *)raw = bytes;
    int64_t live = atomic_fetch_add(&g_live, (int64_t)bytes) + (int64_t)bytes;
    int64_t peak = atomic_load(&g_peak);
    while (live > peak && !atomic_compare_exchange_weak(&g_peak, &peak, live)) {}
    return (char *)raw + HDR;
}

void os_free(void *p) {
    if (!p) return;
    char *raw = (char *)p - HDR;
    atomic_fetch_sub(&g_live, (int64_t) * (size_t *)raw);
    free(raw);
}

int64_t os_alloc_live_bytes(void) { return atomic_load(&g_live); }
int64_t os_alloc_peak_bytes(void) { return atomic_load(&g_peak); }

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
