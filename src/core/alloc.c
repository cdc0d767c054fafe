#include "core/alloc.h"
#include "core/err.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

// Layout: [calloc block ... | size_t bytes | void *block | data (64-byte aligned) ...]. calloc, not
// posix_memalign + memset: memory fresh from the kernel is already zero and glibc does not clear it again, so a
// large block is touched only by its user (a memset would fault in and write every page once more).
enum { ALIGN = 64, META = sizeof(size_t) + sizeof(void *) };
static _Atomic int64_t g_live, g_peak;

void *os_alloc(size_t bytes, const char *what) {
    char *raw = bytes <= SIZE_MAX - META - ALIGN ? calloc(1, bytes + META + ALIGN) : NULL;
    if (!raw) os_die("out of memory: cannot allocate %zu bytes for %s", bytes, what ? what : "?");
    char *p = (char *)(((uintptr_t)raw + META + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    memcpy(p - META, &bytes, sizeof bytes);
    memcpy(p - sizeof(void *), &raw, sizeof raw);
    int64_t live = atomic_fetch_add(&g_live, (int64_t)bytes) + (int64_t)bytes;
    int64_t peak = atomic_load(&g_peak);
    while (live > peak && !atomic_compare_exchange_weak(&g_peak, &peak, live)) {}
    return p;
}

void os_free(void *p) {
    if (!p) return;
    size_t bytes;
    void *raw;
    memcpy(&bytes, (char *)p - META, sizeof bytes);
    memcpy(&raw, (char *)p - sizeof(void *), sizeof raw);
    atomic_fetch_sub(&g_live, (int64_t)bytes);
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
