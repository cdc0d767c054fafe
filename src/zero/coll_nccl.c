// The device transport's collectives (coll_nccl.h). Each collective gets its watchdog sequence number like any other
// and is enqueued on the transport's stream after the compute stream's work so far. comm_wait (and the blocking
// collectives) only make the compute stream wait for its end (join: no host wait, so the prefetch and the background
// reduce-scatter overlap compute as on the CPU) and put it on the watch list below; comm_test asks whether it ended.
// The host observes the device only in the backend's download, which polls through device_host_wait: while it
// waits, the oldest collective still running is watched against --ddp_timeout (counted from the wait, as wd_wait
// does) and the communicator's asynchronous error is polled; at the deadline the watchdog aborts the communicator
// (ncclCommAbort), names the collective and the ranks that did not arrive, and ends the job.
#include "zero/coll_nccl.h"
#include "zero/coll_inplace.h"
#include "zero/phase_deadline.h"
#include "zero/watchdog.h"
#include "core/alloc.h"
#include "core/err.h"
#include "kernels/devcomm.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WATCH 32
static struct {
    os_dc_op *h;
    int64_t seq;
} g_watch[WATCH];
static int g_watch_head, g_watch_n;

static void device_abort(void) { os_dc->abort(); }

// stop on the communicator's error (a peer gone, a network failure), naming the collective
static void device_error_check(int64_t seq) {
    if (os_dc->error() == 0) return;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", os_errmsg());
    os_dc->abort();
    os_die("%s while collective #%lld was in flight (docs/operations.md \"GPUs: several ranks and nodes\")", msg,
           (long long)seq);
}

static int test_or_die(os_dc_op *h) {
    int t = os_dc->test(h);
    if (t < 0) os_die_err();
    return t;
}

// release the watched collectives that have ended (oldest first)
static void retire(void) {
    while (g_watch_n && test_or_die(g_watch[g_watch_head].h)) {
        os_dc->release(g_watch[g_watch_head].h);
        g_watch_head = (g_watch_head + 1) % WATCH, g_watch_n--;
    }
}

typedef struct {
    int (*ready)(void *);   // NULL: only the oldest collective's end
    void *arg;
    int64_t seq;
} host_wait;
static int oldest_ended(void *p) {
    host_wait *w = p;
    if (test_or_die(g_watch[g_watch_head].h) || (w->ready && w->ready(w->arg))) return 1;
    device_error_check(w->seq);
    return 0;
}

// the backend's host wait (os_dc_host_wait): until ready(arg), each watched collective's end in turn under the
// watchdog (a compute stream waiting for a collective cannot be ready before it)
static void device_host_wait(int (*ready)(void *), void *arg) {
    host_wait w = {ready, arg, -1};
    for (retire(); g_watch_n; retire()) {
        if (ready(arg)) return;
        w.seq = g_watch[g_watch_head].seq;
        wd_poll(oldest_ended, &w, w.seq);
    }
    while (!ready(arg)) usleep(20);   // compute only: no deadline
}

// the compute stream waits for h; h watched until it has ended
static void device_join(os_dc_op *h, int64_t seq) {
    os_dc->join(h);
    retire();
    if (g_watch_n == WATCH) {   // bounded: the oldest must end before another is watched
        host_wait w = {NULL, NULL, g_watch[g_watch_head].seq};
        while (!test_or_die(g_watch[g_watch_head].h)) wd_poll(oldest_ended, &w, w.seq);
        retire();
    }
    int i = (g_watch_head + g_watch_n++) % WATCH;
    g_watch[i].h = h, g_watch[i].seq = seq;
}

static void allreduce_sum_f32(float *b, int64_t n, int64_t seq) { device_join(os_dc->allreduce_sum_f32(b, n), seq); }
static void allgather_f32(float *full, int64_t shard_n, int64_t seq) {
    device_join(os_dc->allgather_f32(full, shard_n), seq);
}

typedef struct {
    comm_req base;
    os_dc_op *dop;   // its end on the transport's stream (NULL once tested complete)
} req;

static comm_req *request(os_dc_op *dop, int64_t seq) {
    req *q = os_alloc(sizeof *q, "comm request");
    memset(q, 0, sizeof *q);
    q->base.seq = seq, q->dop = dop;
    return &q->base;
}
static comm_req *iallgather_f32(float *full, int64_t shard_n, int64_t seq) {
    return request(os_dc->allgather_f32(full, shard_n), seq);
}
static comm_req *ireduce_scatter_sum_f32(float *full, float *shard, int64_t shard_n, int64_t seq) {
    return request(os_dc->reduce_scatter_sum_f32(full, shard, shard_n), seq);
}

// ended on the device: later compute is ordered after it anyway; joined for clarity
static int test(comm_req *b) {
    req *q = (req *)b;
    if (b->done) return 1;
    if (!test_or_die(q->dop)) return 0;
    os_dc->join(q->dop);
    os_dc->release(q->dop);
    q->dop = NULL;
    return b->done = 1;
}

static void wait(comm_req *b) {
    req *q = (req *)b;
    if (q->dop) device_join(q->dop, b->seq);
    os_free(q);
}

// every collective ended (under the watchdog), then the communicator's end, bounded
static void close_transport(void) {
    for (retire(); g_watch_n; retire()) {
        host_wait w = {NULL, NULL, g_watch[g_watch_head].seq};
        wd_poll(oldest_ended, &w, w.seq);
    }
    pd_arm("ncclCommFinalize", wd_timeout());
    os_dc->close();
    pd_disarm();
    os_dc_host_wait = NULL;
    wd_set_abort(NULL);
}

static const comm_transport g_nccl = COMM_TRANSPORT_TABLE(.name = "NCCL", .close = close_transport);

const comm_transport *coll_nccl_open(int rank, int size) {
    char id[256];
    OS_ASSERT(os_dc->id_bytes <= (int64_t)sizeof id);
    if (rank == 0 && os_dc->make_id(id) < 0) os_die_err();
    mpi_bcast(id, os_dc->id_bytes, 0, wd_begin(WD_BCAST, os_dc->id_bytes));
    pd_arm("ncclCommInitRank", wd_timeout());   // every rank must join: bounded like MPI_Init
    if (os_dc->open(id, size, rank) < 0) os_die_err();
    pd_disarm();
    wd_set_abort(device_abort);
    os_dc_host_wait = device_host_wait;
    return &g_nccl;
}
