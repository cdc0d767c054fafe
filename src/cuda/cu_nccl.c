// NCCL between GPUs for zero/comm.c's f32 collectives (zero/coll_nccl.c over kernels/devcomm.h; docs/zero.md
// "Transport", docs/operations.md "GPUs").
// libnccl.so.2 is opened at run time (dlopen, as cuBLASLt in cu_lt.c) from the dynamic loader's search path:
// LD_LIBRARY_PATH (pip's nvidia-nccl-cu13 puts it in site-packages/nvidia/nccl/lib), then the system's
// (ldconfig: a CUDA install's libnccl2 package). A build without NCCL at run time still trains on one GPU, or on
// several ranks sharing one (MPI through host buffers): the library is only looked for when NCCL would be used.
// Streams: each collective runs on this file's own stream (non-blocking, created at open). Before it, an event
// recorded on the compute stream (cu_stream()) makes the comm stream wait for every op issued so far; after it, an
// event of its own (one of a small pool) marks its end: test() queries it, join() makes the compute stream wait
// for it (no host wait). The device memory a collective reads or writes is the caller's until join.
#include "cuda/cuda.h"
#include "cuda/cu_runtime.h"
#include "core/err.h"
#include "kernels/devcomm.h"
#include <dlfcn.h>
#include <nccl.h>
#include <string.h>

#define FNS(X)                                                                                                        \
    X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclAllGather) X(ncclReduceScatter) X(ncclAllReduce) \
    X(ncclCommGetAsyncError) X(ncclCommAbort) X(ncclCommFinalize) X(ncclCommDestroy) X(ncclGetErrorString)
#define PTR(f) static __typeof__(&f) p_##f;
FNS(PTR)
#undef PTR

static const char *const LIB = "libnccl.so.2";
static int g_loaded, g_rank;
static ncclComm_t g_comm;
static cudaStream_t g_stream;   // the collectives' stream
static cudaEvent_t g_ready;     // recorded on the compute stream before each collective

enum { POOL = 64 };   // collectives in flight or not yet released at once (zero/coll_nccl.c keeps fewer)
struct os_dc_op {
    cudaEvent_t done;
    int busy;
};
static struct os_dc_op g_pool[POOL];

static int load(void) {
    if (g_loaded) return 0;
    void *h = dlopen(LIB, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return os_errf("NCCL: %s not found: %s (install NCCL for CUDA 13, e.g. pip install nvidia-nccl-cu13, and put "
                       "the folder holding %s on LD_LIBRARY_PATH; or OMNISHARD_COMM=mpi)", LIB, dlerror(), LIB);
#define LOOK(f)                                                                                                       \
    if (!(*(void **)&p_##f = dlsym(h, #f))) return os_errf("NCCL: %s has no %s (NCCL 2.19 or later needed)", LIB, #f);
    FNS(LOOK)
#undef LOOK
    g_loaded = 1;
    return 0;
}

static int nccl_err(ncclResult_t r, const char *what) {
    return os_errf("NCCL: %s: %s", what, p_ncclGetErrorString(r));
}
static void nccl_check(ncclResult_t r, const char *what) {
    if (r != ncclSuccess) os_die("NCCL: %s: %s (rank %d)", what, p_ncclGetErrorString(r), g_rank);
}

static int device(void) { return cu_device(); }

static int make_id(void *id) {
    ncclResult_t r = p_ncclGetUniqueId((ncclUniqueId *)id);
    return r == ncclSuccess ? 0 : nccl_err(r, "ncclGetUniqueId");
}

static int open_comm(const void *id, int nranks, int rank) {
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = p_ncclCommInitRank(&g_comm, nranks, u, rank);
    if (r != ncclSuccess) return nccl_err(r, "ncclCommInitRank");
    g_rank = rank;
    CU_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    CU_CHECK(cudaEventCreateWithFlags(&g_ready, cudaEventDisableTiming));
    int v = 0;
    p_ncclGetVersion(&v);
    os_info("NCCL %d.%d.%d: communicator of %d ranks", v / 10000, v / 100 % 100, v % 100, nranks);
    return 0;
}

// the comm stream waits for the compute stream's work so far
static void after_compute(void) {
    if (!g_comm) os_die("NCCL: a collective without a communicator (aborted, or never opened)");
    CU_CHECK(cudaEventRecord(g_ready, cu_stream()));
    CU_CHECK(cudaStreamWaitEvent(g_stream, g_ready, 0));
}

// the end of the collective just enqueued, as a handle from the pool
static os_dc_op *ended(void) {
    for (int i = 0; i < POOL; i++)
        if (!g_pool[i].busy) {
            os_dc_op *h = &g_pool[i];
            if (!h->done) CU_CHECK(cudaEventCreateWithFlags(&h->done, cudaEventDisableTiming));
            CU_CHECK(cudaEventRecord(h->done, g_stream));
            h->busy = 1;
            return h;
        }
    os_die("NCCL: more than %d collectives in flight (internal error)", POOL);
}

static os_dc_op *allgather_f32(float *full, int64_t shard_n) {
    after_compute();
    nccl_check(p_ncclAllGather(full + (int64_t)g_rank * shard_n, full, (size_t)shard_n, ncclFloat32, g_comm, g_stream),
               "ncclAllGather");
    return ended();
}

static os_dc_op *reduce_scatter_sum_f32(const float *full, float *shard, int64_t shard_n) {
    after_compute();
    nccl_check(p_ncclReduceScatter(full, shard, (size_t)shard_n, ncclFloat32, ncclSum, g_comm, g_stream),
               "ncclReduceScatter");
    return ended();
}

static os_dc_op *allreduce_sum_f32(float *buf, int64_t n) {
    after_compute();
    nccl_check(p_ncclAllReduce(buf, buf, (size_t)n, ncclFloat32, ncclSum, g_comm, g_stream), "ncclAllReduce");
    return ended();
}

static int test(os_dc_op *h) {
    cudaError_t e = cudaEventQuery(h->done);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) return 0;
    return os_errf("NCCL: a collective's end: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}

static void join(os_dc_op *h) { CU_CHECK(cudaStreamWaitEvent(cu_stream(), h->done, 0)); }
static void release(os_dc_op *h) { h->busy = 0; }

static int error(void) {
    if (!g_comm) return 0;
    ncclResult_t a = ncclSuccess, r = p_ncclCommGetAsyncError(g_comm, &a);
    if (r != ncclSuccess) return nccl_err(r, "ncclCommGetAsyncError");
    return a == ncclSuccess || a == ncclInProgress ? 0 : nccl_err(a, "asynchronous error of the communicator");
}

static void abort_comm(void) {
    if (!g_comm) return;
    ncclComm_t c = g_comm;
    g_comm = NULL;
    p_ncclCommAbort(c);
}

static void close_comm(void) {
    if (!g_comm) return;
    CU_CHECK(cudaStreamSynchronize(g_stream));
    nccl_check(p_ncclCommFinalize(g_comm), "ncclCommFinalize");
    nccl_check(p_ncclCommDestroy(g_comm), "ncclCommDestroy");
    g_comm = NULL;
}

static const os_devcomm g_nccl = {
    .name = "NCCL",
    .id_bytes = sizeof(ncclUniqueId),
    .load = load,
    .device = device,
    .make_id = make_id,
    .open = open_comm,
    .allgather_f32 = allgather_f32,
    .reduce_scatter_sum_f32 = reduce_scatter_sum_f32,
    .allreduce_sum_f32 = allreduce_sum_f32,
    .test = test,
    .join = join,
    .release = release,
    .error = error,
    .abort = abort_comm,
    .close = close_comm,
};

const os_devcomm *os_cuda_devcomm(void) { return &g_nccl; }
