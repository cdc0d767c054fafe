// The guard backend of the device seam (kernels/ops.h; --device guard, a test backend): the CPU backend's
// kernels, but its memory (the table's alloc) is mapped PROT_NONE except while one of its own calls is given it.
// Every member of the table is wrapped: each pointer argument that lies in a guard buffer opens that buffer (read
// and write) for the call and closes it after; the buffers not passed stay closed. A host read or write of a
// backend buffer outside the seam then stops the program with SIGSEGV, as a device's memory would be out of the
// host's reach: the missing upload/download is found without a device.
// The compute members run later, in order, at download and free, as on a device's stream (ops_guard_queue.c).
// Strict (the default; --device guard:lax turns it off): a compute member given host memory for any pointer
// argument (NULL aside), upload a host destination or download a host source, stops naming the member and the
// argument, as a device kernel could not read it (docs/design.md "The guard backend"). The memory is
// ops_guard_mem.c's.
#include "kernels/ops_guard_mem.h"
#include "kernels/ops_guard_queue.h"
#include <pthread.h>
#include <string.h>

// after the calls recorded before it (stream order: they may still use p, docs/design.md "The guard backend")
static void release(void *p) {
    if (!p) return;
    gd_flush();
    gd_unmap(p);
}

// ---- the memory members: upload copies the host's bytes now and writes them in queue order; download is the
// synchronisation point (the queue runs, then the bytes are copied out) ----
typedef struct {
    void *dst;
    int64_t bytes;
} upload_q;

static void upload_run(const void *v) {
    const upload_q *q = v;
    const void *p[] = {q->dst};
    gd_opened o = gd_enter(p, 1);
    memcpy(q->dst, gd_extra(v, sizeof *q), (size_t)q->bytes);
    gd_leave(&o);
}

static void upload(void *dst, const void *src, int64_t bytes) {
    const void *p[] = {dst, src};
    gd_strict("upload", "dst", p, 1);
    if (gd_idle()) {   // nothing pending: the order made is now, and the queue need not hold a copy of the bytes
        gd_opened o = gd_enter(p, 2);
        memcpy(dst, src, (size_t)bytes);
        gd_leave(&o);
        return;
    }
    gd_opened o = gd_enter(p + 1, 1);   // (a backend source: its bytes now, as a host copy would read them)
    gd_enqueue(upload_run, &(upload_q){dst, bytes}, sizeof(upload_q), src, (size_t)bytes);
    gd_leave(&o);
}

static void download(void *dst, const void *src, int64_t bytes) {
    const void *p[] = {src, dst};
    gd_strict("download", "src", p, 1);
    gd_flush();
    gd_opened o = gd_enter(p, 2);
    memcpy(dst, src, (size_t)bytes);
    gd_leave(&o);
}

static os_ops g_guard;
static void fill(void) {
    g_guard = os_ops_cpu;   // the members that answer the host (attention_stats_floats) as they are
    g_guard.name = "guard";
    g_guard.alloc = gd_alloc, g_guard.free = release, g_guard.upload = upload, g_guard.download = download;
    gd_fill_queued(&g_guard);
    g_guard.alloc_uninit = gd_alloc, g_guard.alloc_sparse = gd_alloc, g_guard.host_memory = 0;   // MPI stages (zero/coll_staged.c)
    g_guard.held_bytes = gd_held_bytes;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

const os_ops *os_ops_guard(void) {
    pthread_once(&once, fill);
    return &g_guard;
}

const os_ops *os_ops_guard_open(int bf16) {
    pthread_once(&once, fill);
    gd_flush();   // calls recorded before run at the precision they were made in
    const os_ops *cpu = os_ops_cpu_open(bf16);
    gd_set_cpu(cpu);
    g_guard.bf16 = bf16;
    return &g_guard;
}
