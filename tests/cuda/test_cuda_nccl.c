// NCCL through the device transport (src/cuda/cu_nccl.c, kernels/devcomm.h) on one GPU: one GPU cannot hold two
// NCCL ranks, so this runs a communicator of one rank, which still goes through everything but the wire: libnccl.so.2
// opened by dlopen and every symbol found, ncclGetUniqueId, ncclCommInitRank, the collectives on the transport's
// own stream ordered after the compute stream's work by an event (the inputs are written on cu_stream() just
// before each collective: a missing wait reads stale bytes), test/join/release of the end events, the
// asynchronous error query, finalize and destroy, then a second communicator torn down by ncclCommAbort.
// With one rank an all-gather leaves the buffer as it is, a reduce-scatter copies full into shard and an
// all-reduce leaves the sum of one term: every result is checked bit for bit.
// Without a GPU it says why and passes; without libnccl.so.2 it says so (the message cu_nccl.c gives a run) and
// passes: make CUDA=1 builds it; tools/device-check.sh runs it on the GPU, tests/test_device_flag.py here.
#include "cuda/cuda.h"
#include "cuda/cu_alloc.h"
#include "cuda/cu_runtime.h"
#include "core/alloc.h"
#include "core/err.h"
#include "kernels/devcomm.h"
#include "../unit/check.h"
#include <string.h>

enum { N = 1 << 20 };

// h's n floats into d, issued on the compute stream (the collective after it must see them)
static void put(float *d, const float *h, int64_t n) {
    CU_CHECK(cudaMemcpyAsync(d, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice, cu_stream()));
}
static void get(float *h, const float *d, int64_t n) {
    CU_CHECK(cudaStreamSynchronize(cu_stream()));
    CU_CHECK(cudaMemcpy(h, d, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost));
}

// waits for h's end on the host (test), then joins it as zero/coll_nccl.c's test does
static void finish(const os_devcomm *t, os_dc_op *h) {
    int done;
    while ((done = t->test(h)) == 0) {}
    CHECK(done == 1, "test: %s", os_errmsg());
    t->join(h);
    t->release(h);
}

static void collectives(const os_devcomm *t) {
    float *h = os_alloc(sizeof(float) * N, "host"), *back = os_alloc(sizeof(float) * N, "host");
    float *full = cu_alloc(sizeof(float) * N, "full"), *shard = cu_alloc(sizeof(float) * N, "shard");
    for (int i = 0; i < N; i++) h[i] = (float)i * 0.5f - 7.25f;
    put(full, h, N);
    finish(t, t->allgather_f32(full, N));
    get(back, full, N);
    CHECK(!memcmp(back, h, sizeof(float) * N), "all-gather of one rank leaves the buffer");
    for (int i = 0; i < N; i++) h[i] = -(float)i / 3.0f;
    put(full, h, N);   // on the compute stream right before: the reduce-scatter must read these
    os_dc_op *rs = t->reduce_scatter_sum_f32(full, shard, N);
    t->join(rs);   // comm_wait's way: the compute stream waits, the host does not
    get(back, shard, N);
    CHECK(t->test(rs) == 1, "after the compute stream waited for it, the reduce-scatter has ended");
    t->release(rs);
    CHECK(!memcmp(back, h, sizeof(float) * N), "reduce-scatter of one rank: shard == full as written just before");
    for (int i = 0; i < N; i++) h[i] = (float)(i % 977) * 1e-3f;
    put(shard, h, N);
    finish(t, t->allreduce_sum_f32(shard, N));
    get(back, shard, N);
    CHECK(!memcmp(back, h, sizeof(float) * N), "all-reduce of one rank leaves the buffer");
    CHECK(t->error() == 0, "no asynchronous error: %s", os_errmsg());
    cu_free(full), cu_free(shard), os_free(h), os_free(back);
}

int main(void) {
    if (!os_cuda_open(-1, 0, 0)) {
        printf("test_cuda_nccl: skipped, no GPU: %s\n", os_errmsg());
        return 0;
    }
    const os_devcomm *t = os_cuda_devcomm();
    if (t->load() < 0) {
        printf("test_cuda_nccl: skipped, %s\n", os_errmsg());
        return 0;
    }
    char id[256];
    CHECK(t->id_bytes <= (int64_t)sizeof id, "id fits");
    CHECK(t->device() == cu_device(), "the transport's GPU is the backend's");
    CHECK(t->make_id(id) == 0, "ncclGetUniqueId: %s", os_errmsg());
    CHECK(t->open(id, 1, 0) == 0, "ncclCommInitRank: %s", os_errmsg());
    collectives(t);
    t->close();
    CHECK(t->make_id(id) == 0 && t->open(id, 1, 0) == 0, "a second communicator: %s", os_errmsg());
    finish(t, t->allreduce_sum_f32(cu_alloc(64, "x"), 16));
    t->abort();   // what the watchdog does at the deadline; then no collective may be issued (cu_nccl.c says so)
    CHECK(t->error() == 0, "an aborted communicator is gone: nothing to report");
    return check_report("test_cuda_nccl");
}
