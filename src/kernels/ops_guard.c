// The guard backend of the device seam (kernels/ops.h; OMNISHARD_BACKEND=guard, a test hook): the CPU backend's
// kernels, but its memory (the table's alloc) is mapped PROT_NONE except while one of its own calls that take such
// memory runs. A host read or write of a backend buffer outside the seam then stops the program with SIGSEGV, as
// a device's memory would be out of the host's reach: the missing upload/download is found without a device.
// Guarded calls today: upload, download, xent_fwd_bwd, sumsq (the members the callers hand backend memory); the
// rest run the CPU kernels on host memory unchanged (docs/design.md "Device seam").
#include "kernels/ops.h"
#include "core/err.h"
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    void *p;
    size_t len;
} region;

static region *g_r;
static int g_n, g_cap;

static void protect_all(int prot) {
    for (int i = 0; i < g_n; i++)
        if (mprotect(g_r[i].p, g_r[i].len, prot)) os_die("guard backend: mprotect of %zu bytes failed", g_r[i].len);
}
static void open_all(void) { protect_all(PROT_READ | PROT_WRITE); }
static void close_all(void) { protect_all(PROT_NONE); }

static void *alloc(int64_t bytes, const char *what) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = ((size_t)(bytes > 0 ? bytes : 1) + page - 1) / page * page;
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);   // zero pages
    if (p == MAP_FAILED) os_die("guard backend: out of memory: %zu bytes for %s", len, what);
    if (g_n == g_cap) {
        int cap = 2 * g_cap + 16;
        region *more = mmap(NULL, sizeof(region) * (size_t)cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (more == MAP_FAILED) os_die("guard backend: out of memory for its table of %d buffers", cap);
        if (g_r) memcpy(more, g_r, sizeof(region) * (size_t)g_n), munmap(g_r, sizeof(region) * (size_t)g_cap);
        g_r = more, g_cap = cap;
    }
    g_r[g_n++] = (region){p, len};
    return p;
}

static void release(void *p) {
    if (!p) return;
    for (int i = 0; i < g_n; i++)
        if (g_r[i].p == p) {
            munmap(p, g_r[i].len);
            g_r[i] = g_r[--g_n];
            return;
        }
    os_die("guard backend: free of %p, which it did not allocate", p);
}

static void upload(void *dst, const void *src, int64_t bytes) {
    open_all(), os_ops_cpu.upload(dst, src, bytes), close_all();
}
static void download(void *dst, const void *src, int64_t bytes) {
    open_all(), os_ops_cpu.download(dst, src, bytes), close_all();
}
static void xent(float *logits, int64_t ld, const int32_t *labels, int64_t N, int64_t V, float dscale, double *sum,
                 int64_t *ncorrect) {
    open_all(), os_ops_cpu.xent_fwd_bwd(logits, ld, labels, N, V, dscale, sum, ncorrect), close_all();
}
static void sumsq(const float *x, int64_t N, double *out) { open_all(), os_ops_cpu.sumsq(x, N, out), close_all(); }

static os_ops g_guard;
static void fill(void) {
    g_guard = os_ops_cpu;
    g_guard.name = "guard";
    g_guard.alloc = alloc, g_guard.free = release, g_guard.upload = upload, g_guard.download = download;
    g_guard.xent_fwd_bwd = xent, g_guard.sumsq = sumsq;
}

const os_ops *os_ops_guard(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill);
    return &g_guard;
}
