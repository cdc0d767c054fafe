// The CUDA backend's caching allocator (cu_alloc.h): size classes over cudaMalloc, free lists per class, counters.
// Blocks are never split or merged; a block is found again by its pointer through an open-addressing table.
#include "cuda/cu_alloc.h"
#include "cuda/cu_runtime.h"
#include "core/alloc.h"
#include "core/err.h"
#include <pthread.h>
#include <string.h>

enum { MIN_CLASS = 512, STEPS = 8 };   // 8 classes per power of two

int64_t cu_alloc_class(int64_t bytes) {
    if (bytes <= MIN_CLASS) return MIN_CLASS;
    int k = 63 - __builtin_clzll((unsigned long long)(bytes - 1));   // 2^k < bytes <= 2^(k+1), k >= 9
    int64_t step = ((int64_t)1 << k) / STEPS;                         // classes 2^k + j * step, j = 1..8
    return (bytes + step - 1) / step * step;
}

typedef struct {
    void *p;
    int64_t size;   // its class
    int64_t req;    // bytes asked for (while used)
    int used;
    int next;       // the next free block of its class, -1: none
} block;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static block *g_b;
static int g_nb, g_capb;
static int *g_slot;     // pointer hash -> block index + 1 (0: empty); g_nslot a power of two, at least 2 * g_capb
static int g_nslot;
static int g_free[64 * STEPS + 1];   // per class: the first free block + 1 (0: none)
static cu_mem_stats g_st;

static int class_id(int64_t size) {   // size: a class; 0 for 512 bytes, then 1, 2, .. in size order
    if (size <= MIN_CLASS) return 0;
    int k = 63 - __builtin_clzll((unsigned long long)(size - 1));
    return (k - 9) * STEPS + (int)(size / (((int64_t)1 << k) / STEPS)) - STEPS;
}

static size_t hash(const void *p) { return ((uintptr_t)p >> 8) * 0x9E3779B97F4A7C15ull; }

static void slot_put(int i) {
    size_t m = (size_t)g_nslot - 1, h = hash(g_b[i].p) & m;
    while (g_slot[h]) h = (h + 1) & m;
    g_slot[h] = i + 1;
}

static int slot_find(const void *p) {
    size_t m = (size_t)g_nslot - 1;
    for (size_t h = hash(p) & m; g_slot[h]; h = (h + 1) & m)
        if (g_b[g_slot[h] - 1].p == p) return g_slot[h] - 1;
    return -1;
}

static void rehash(int nslot) {
    os_free(g_slot);
    g_slot = os_alloc(sizeof *g_slot * (size_t)nslot, "CUDA allocator table");
    g_nslot = nslot;
    for (int i = 0; i < g_nb; i++) slot_put(i);
}

static void add_block(void *p, int64_t size, int64_t req) {
    if (g_nb == g_capb) {
        int cap = g_capb ? 2 * g_capb : 256;
        block *nb = os_alloc(sizeof *nb * (size_t)cap, "CUDA allocator blocks");
        if (g_nb) memcpy(nb, g_b, sizeof *nb * (size_t)g_nb);
        os_free(g_b);
        g_b = nb, g_capb = cap;
        rehash(4 * cap);
    }
    g_b[g_nb] = (block){p, size, req, 1, -1};
    slot_put(g_nb++);
}

// every free block given back to the device (after the work that may still use them: cudaFree waits for it)
static void release_free(void) {
    int n = 0;
    for (int i = 0; i < g_nb; i++) {
        if (!g_b[i].used) {
            cu_check(cudaFree(g_b[i].p), "cudaFree of a cached block");
            g_st.reserved -= g_b[i].size;
        } else {
            g_b[n++] = g_b[i];
        }
    }
    g_nb = n;
    memset(g_free, 0, sizeof g_free);
    rehash(g_nslot);
}

static void note_device_used(void) {
    size_t fr, tot;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) return;
    g_st.device_total = (int64_t)tot;
    if ((int64_t)(tot - fr) > g_st.device_used_peak) g_st.device_used_peak = (int64_t)(tot - fr);
}

void *cu_alloc(int64_t bytes, const char *what) {
    int64_t size = cu_alloc_class(bytes);
    int c = class_id(size);
    pthread_mutex_lock(&g_mu);
    void *p = NULL;
    if (g_free[c]) {   // a block of this class freed earlier
        int i = g_free[c] - 1;
        g_free[c] = g_b[i].next + 1, g_b[i].used = 1, p = g_b[i].p;
        g_b[i].req = bytes;
    } else {
        cudaError_t e = cudaMalloc(&p, (size_t)size);
        if (e == cudaErrorMemoryAllocation) {   // the cached blocks back, then once more
            cudaGetLastError();
            release_free();
            e = cudaMalloc(&p, (size_t)size);
        }
        if (e != cudaSuccess) {
            pthread_mutex_unlock(&g_mu);
            os_die("CUDA backend: out of device memory: %lld bytes for %s (%s; %lld bytes in use, peak %lld, %lld held "
                   "from cudaMalloc)", (long long)bytes, what, cudaGetErrorString(e), (long long)g_st.in_use,
                   (long long)g_st.peak_in_use, (long long)g_st.reserved);
        }
        add_block(p, size, bytes);
        g_st.reserved += size;
        if (g_st.reserved > g_st.peak_reserved) g_st.peak_reserved = g_st.reserved;
        note_device_used();
    }
    g_st.in_use += size, g_st.requested += bytes;
    if (g_st.in_use > g_st.peak_in_use) g_st.peak_in_use = g_st.in_use;
    if (g_st.requested > g_st.peak_requested) g_st.peak_requested = g_st.requested;
    pthread_mutex_unlock(&g_mu);
    return p;
}

void cu_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_mu);
    int i = g_nslot ? slot_find(p) : -1;
    if (i < 0 || !g_b[i].used) {
        pthread_mutex_unlock(&g_mu);
        os_die("CUDA backend: free of %p, which the allocator did not hand out (or freed already)", p);
    }
    int c = class_id(g_b[i].size);
    g_b[i].used = 0, g_b[i].next = g_free[c] - 1, g_free[c] = i + 1;
    g_st.in_use -= g_b[i].size, g_st.requested -= g_b[i].req;
    pthread_mutex_unlock(&g_mu);
}

cu_mem_stats cu_alloc_stats(void) {
    pthread_mutex_lock(&g_mu);
    cu_mem_stats s = g_st;
    pthread_mutex_unlock(&g_mu);
    return s;
}

void *cu_scratch(int64_t bytes, const char *what) { return cu_alloc(bytes, what); }
void cu_scratch_free(void *p) { cu_free(p); }
