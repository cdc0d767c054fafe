#include "zero/comm.h"
#include "zero/phase_deadline.h"
#include "zero/transport.h"
#include "zero/watchdog.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/knobs.h"
#include "core/rng.h"
#include "kernels/devcomm.h"
#include "kernels/ops.h"
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int g_rank = 0, g_size = 1, g_inited = 0;
#define CHUNK ((int64_t)1 << 30)

// The f32 collectives (comm_allreduce_sum_f32, comm_allgather_f32, comm_iallgather_f32, the reduce-scatters) take
// the backend's memory (kernels/ops.h: buckets, gradients, gathered rows); MPI reads and writes host memory only.
// How their bytes travel, chosen per collective here and nowhere else:
// - in place, when the backend's memory is the host's (the CPU backend; and with one rank, where nothing travels);
// - host staging otherwise (the guard backend; several ranks sharing one GPU): what the rank sends is downloaded
//   into a host buffer, MPI (and the ring's adds) run on it as in place, and what it received is uploaded when the
//   collective completes. The same additions in the same order: the same bits as in place.
// - the device transport (kernels/devcomm.h: NCCL between GPUs), chosen once at start-up (comm_choose_way,
//   zero/transport.h) when every rank has a GPU of its own: the collectives run on its stream, ordered by events
//   against the compute stream (below, "Device collectives"); nothing is staged.
static int g_way = COMM_WAY_HOST;
static int device_way(void) { return g_way == COMM_WAY_DEVICE; }
static int staged(void) { return g_size > 1 && !os_k->host_memory && !device_way(); }
static void transport_setup(void);
static void device_join(os_dc_op *h, int64_t seq);
static int test_or_die(os_dc_op *h);
static float *host_floats(int64_t n) { return os_alloc_uninit(sizeof(float) * (size_t)n, "host staging buffer"); }
static void down(float *h, const float *d, int64_t n) { os_k->download(h, d, (int64_t)sizeof(float) * n); }
static void up(float *d, const float *h, int64_t n) { os_k->upload(d, h, (int64_t)sizeof(float) * n); }

static void abort_hook(int code) { MPI_Abort(MPI_COMM_WORLD, code ? code : 1); }

void comm_init(int *argc, char ***argv) {
    int provided;
    pd_arm("MPI_Init", wd_timeout());   // every rank must arrive: bounded like a collective
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    pd_disarm();
    g_inited = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    wd_init(g_rank, g_size);
    if (g_size > 1) {
        os_rank = g_rank;
        os_set_abort_hook(abort_hook);
    }
    transport_setup();
}

static void device_drain(void);
void comm_finalize(void) {
    if (device_way()) {   // every collective ended (under the watchdog), then the communicator's end, bounded
        device_drain();
        pd_arm("ncclCommFinalize", wd_timeout());
        os_dc->close();
        pd_disarm();
        g_way = COMM_WAY_HOST;
        os_dc_host_wait = NULL;
    }
    if (g_inited) {
        pd_arm("MPI_Finalize", wd_timeout());
        MPI_Finalize();
        pd_disarm();
    }
    g_inited = 0;
}
int comm_rank(void) { return g_rank; }
int comm_size(void) { return g_size; }
_Noreturn void comm_abort(int code) {
    if (g_inited) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

void comm_set_timeout(double seconds) { wd_set_timeout(seconds); }
void comm_set_stop_note(const char *note) { wd_set_note(note); }
void comm_set_step(int64_t step) { wd_set_step(step); }

void comm_barrier(void) {
    if (g_size == 1) return;
    int64_t seq = wd_begin(WD_BARRIER, 0);
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    wd_wait(&r, 1, seq);
}

static void bcast(void *buf, int64_t bytes, int root, enum wd_kind kind) {
    if (g_size == 1) return;
    int64_t seq = wd_begin(kind, bytes);
    for (int64_t o = 0; o < bytes; o += CHUNK) {
        int64_t n = bytes - o < CHUNK ? bytes - o : CHUNK;
        MPI_Request r;
        MPI_Ibcast((char *)buf + o, (int)n, MPI_BYTE, root, MPI_COMM_WORLD, &r);
        wd_wait(&r, 1, seq);
    }
}
void comm_bcast(void *buf, int64_t bytes, int root) { bcast(buf, bytes, root, WD_BCAST); }

static void allreduce(void *buf, int64_t n, MPI_Datatype t, size_t es, MPI_Op op, enum wd_kind kind) {
    if (g_size == 1) return;
    int64_t seq = wd_begin(kind, n * (int64_t)es);
    for (int64_t o = 0; o < n; o += CHUNK) {
        int64_t k = n - o < CHUNK ? n - o : CHUNK;
        MPI_Request r;
        MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + o * (int64_t)es, (int)k, t, op, MPI_COMM_WORLD, &r);
        wd_wait(&r, 1, seq);
    }
}
typedef struct ring ring;
static void ring_run(float *full, float *recv, int64_t shard_n, int64_t seq);
static void allgather_f32(float *full, int64_t shard_n, int64_t seq);

// Large sums whose length divides into the ranks (the gradient buckets at stages 0-1) go through the same ring as
// the reduce-scatter, then an all-gather: scratch of n/size floats, where Open MPI's non-blocking all-reduce takes
// a whole temporary copy and, in place, reduces through a binomial tree; every element is summed in one fixed order.
#define RING_MIN 16384
static void allreduce_sum_f32(float *b, int64_t n) {
    if (n % g_size || n < (int64_t)RING_MIN * g_size) {
        allreduce(b, n, MPI_FLOAT, 4, MPI_SUM, WD_ALLREDUCE);
        return;
    }
    int64_t seq = wd_begin(WD_ALLREDUCE, n * 4), s = n / g_size;
    float *scratch = os_alloc_uninit(sizeof(float) * (size_t)s, "all-reduce slice");   // the ring receives into all of it
    ring_run(b, scratch, s, seq);
    os_free(scratch);
    allgather_f32(b, s, seq);
}
void comm_allreduce_sum_f32(float *b, int64_t n) {
    if (g_size == 1) return;
    if (device_way()) return device_join(os_dc->allreduce_sum_f32(b, n), wd_begin(WD_ALLREDUCE, n * 4));
    if (!staged()) return allreduce_sum_f32(b, n);
    float *h = host_floats(n);
    down(h, b, n);
    allreduce_sum_f32(h, n);
    up(b, h, n);
    os_free(h);
}
void comm_allreduce_sum_f64(double *b, int64_t n) { allreduce(b, n, MPI_DOUBLE, 8, MPI_SUM, WD_ALLREDUCE); }
void comm_allreduce_max_i64(int64_t *b, int64_t n) { allreduce(b, n, MPI_INT64_T, 8, MPI_MAX, WD_ALLREDUCE); }
void comm_allreduce_min_i64(int64_t *b, int64_t n) { allreduce(b, n, MPI_INT64_T, 8, MPI_MIN, WD_ALLREDUCE); }

// A count above INT_MAX is sent as a derived contiguous type of 256 floats (slices are padded by the runtime).
static MPI_Datatype big_type(int64_t n, int *count) {
    if (n <= INT_MAX) {
        *count = (int)n;
        return MPI_FLOAT;
    }
    OS_ASSERT(n % 256 == 0);
    MPI_Datatype t;
    MPI_Type_contiguous(256, MPI_FLOAT, &t);
    MPI_Type_commit(&t);
    *count = (int)(n / 256);
    return t;
}
static void free_type(MPI_Datatype t) {
    if (t != MPI_FLOAT) MPI_Type_free(&t);
}

static void allgather_f32(float *full, int64_t shard_n, int64_t seq) {
    int c;
    MPI_Datatype t = big_type(shard_n, &c);
    MPI_Request r;
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full, c, t, MPI_COMM_WORLD, &r);
    wd_wait(&r, 1, seq);
    free_type(t);
}
void comm_allgather_f32(float *full, int64_t shard_n) {
    if (g_size == 1) return;
    int64_t seq = wd_begin(WD_ALLGATHER, shard_n * 4), n = shard_n * g_size, own = shard_n * g_rank;
    if (device_way()) return device_join(os_dc->allgather_f32(full, shard_n), seq);
    if (!staged()) return allgather_f32(full, shard_n, seq);
    float *h = host_floats(n);
    down(h + own, full + own, shard_n);
    allgather_f32(h, shard_n, seq);
    up(full, h, n);
    os_free(h);
}

// A ring over point-to-point messages: at step k (0 .. size-2) rank r sends its partial sum of slice (r-k-1) mod size
// to rank r+1, receives the partial of slice (r-k-2) mod size from rank r-1 into recv and adds it to its own; after
// size-1 steps slice r holds the sum over all ranks (each slice is summed in one fixed order): in full for the
// all-reduce, in recv (the shard) for the reduce-scatter, whose last step adds into recv instead. It needs no
// memory beyond full and recv: Open MPI 4.1's MPI_Reduce_scatter_block allocated 1.5x (2 ranks) to 2x (4 ranks)
// the whole buffer as hidden temporaries (bench/plan_vs_rss.py, docs/performance.md), a whole gradient bucket that
// neither the runtime's accounting nor omnishard plan could see.
// The ring is a small state machine so that it can run in the background (comm_ireduce_scatter_sum_f32): one step's
// messages are in flight at a time; when they complete, the partial is added and the next step is posted. Each
// ring's messages carry a tag of their own (from the collective's sequence number), so rings in flight together,
// or advanced at different moments on different ranks, never take each other's messages.
struct ring {
    float *full, *recv, *shard;   // shard: NULL (the sum's slice `rank` stays in full), or recv: the sum goes there
    int64_t shard_n, seq;
    int k, nr, tag;               // k: the step in flight (size-1: done)
    MPI_Request *r;               // 2 per chunk of the step
};
#define RING_TAG0 8192            // tags RING_TAG0 .. +16383 (the watchdog's are 7401-7402)

static void ring_post(ring *q) {
    int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
    float *snd = q->full + (int64_t)((g_rank - q->k - 1 + 2 * g_size) % g_size) * q->shard_n;
    q->nr = 0;
    for (int64_t o = 0; o < q->shard_n; o += CHUNK) {
        int n = (int)(q->shard_n - o < CHUNK ? q->shard_n - o : CHUNK);
        MPI_Irecv(q->recv + o, n, MPI_FLOAT, prev, q->tag, MPI_COMM_WORLD, &q->r[q->nr++]);
        MPI_Isend(snd + o, n, MPI_FLOAT, next, q->tag, MPI_COMM_WORLD, &q->r[q->nr++]);
    }
}

static void ring_start(ring *q, float *full, float *recv, float *shard, int64_t shard_n, int64_t seq) {
    OS_ASSERT(!shard || shard == recv);
    *q = (ring){.full = full, .recv = recv, .shard = shard, .shard_n = shard_n, .seq = seq,
                .tag = RING_TAG0 + (int)(seq % 16384)};
    q->r = os_alloc(sizeof(MPI_Request) * (size_t)(2 * (shard_n / CHUNK + 1)), "ring requests");
    if (g_size > 1) ring_post(q);
    else q->k = g_size - 1;
}

// the step in flight has completed: add its partial, post the next step (if any). The last step's sum is slice
// `rank`; a reduce-scatter receiving into its shard writes the sum there (the same additions), not into full and
// then a copy: one pass over the slice fewer.
static void ring_advance(ring *q) {
    int64_t n = q->shard_n;
    float *acc = q->full + (int64_t)((g_rank - q->k - 2 + 2 * g_size) % g_size) * n, *recv = q->recv;
    if (q->k == g_size - 2 && q->shard == recv) acc = recv, recv = q->full + (int64_t)g_rank * n;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) acc[i] += recv[i];
    if (++q->k < g_size - 1) ring_post(q);
}

static void ring_finish(ring *q) {   // a reduce-scatter's sum is in its shard already, except with one rank
    if (q->shard && g_size == 1 && q->shard != q->full) os_k->copy(q->shard, q->full, q->shard_n);
    os_free(q->r);
    q->r = NULL;
}

// run the rest of the ring, each step's wait under the watchdog's deadline
static void ring_complete(ring *q) {
    while (q->k < g_size - 1) {
        wd_wait(q->r, q->nr, q->seq);
        ring_advance(q);
    }
    ring_finish(q);
}

// blocking (the stage 0-1 all-reduce): the sum's slice `rank` stays in full
static void ring_run(float *full, float *recv, int64_t shard_n, int64_t seq) {
    ring q;
    ring_start(&q, full, recv, NULL, shard_n, seq);
    ring_complete(&q);
}

static void allgather_bytes(const void *in, void *out, int64_t bytes, enum wd_kind kind) {
    OS_ASSERT(bytes <= INT_MAX);
    int64_t seq = wd_begin(kind, bytes);
    MPI_Request r;
    MPI_Iallgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &r);
    wd_wait(&r, 1, seq);
}
void comm_allgather_bytes(const void *in, void *out, int64_t bytes) { allgather_bytes(in, out, bytes, WD_ALLGATHER); }

static int *int_counts(const int64_t *v, int n, const char *what) {
    int *o = os_alloc(sizeof(int) * (size_t)n, "all-to-all counts");
    for (int i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] > INT_MAX)
            os_die("all-to-all: %s %lld for rank %d is outside [0, INT_MAX]", what, (long long)v[i], i);
        o[i] = (int)v[i];
    }
    return o;
}

void comm_alltoallv_bytes(const void *send, const int64_t *sbytes, const int64_t *soff, void *recv,
                          const int64_t *rbytes, const int64_t *roff) {
    if (g_size == 1) {
        if (sbytes[0]) memcpy((char *)recv + roff[0], (const char *)send + soff[0], (size_t)sbytes[0]);
        return;
    }
    int64_t total = 0;
    for (int p = 0; p < g_size; p++) total += sbytes[p];
    int64_t seq = wd_begin(WD_ALLTOALL, total);
    int *sc = int_counts(sbytes, g_size, "send bytes"), *sd = int_counts(soff, g_size, "send offset");
    int *rc = int_counts(rbytes, g_size, "receive bytes"), *rd = int_counts(roff, g_size, "receive offset");
    MPI_Request r;
    MPI_Ialltoallv(send, sc, sd, MPI_BYTE, recv, rc, rd, MPI_BYTE, MPI_COMM_WORLD, &r);
    wd_wait(&r, 1, seq);
    os_free(sc), os_free(sd), os_free(rc), os_free(rd);
}

struct comm_req {
    int ring, done;        // ring: a reduce-scatter (q), else an all-gather (r, t)
    ring q;
    MPI_Request r;
    MPI_Datatype t;
    int64_t seq;
    // staged (staged()): the host buffers MPI works on (h, and h2 freed with it) and where h's n floats are
    // uploaded when the collective completes
    float *h, *h2, *dev;
    int64_t n;
    os_dc_op *dop;   // a device collective (device_way()): its end on the transport's stream
};

static comm_req *request(void) {
    comm_req *q = os_alloc(sizeof *q, "comm request");
    memset(q, 0, sizeof *q);
    q->r = MPI_REQUEST_NULL;
    q->t = MPI_FLOAT;
    return q;
}

// a staged collective has completed: what it received goes to the backend
static void unstage(comm_req *q) {
    if (!q->h) return;
    up(q->dev, q->h, q->n);
    os_free(q->h), os_free(q->h2);
    q->h = q->h2 = NULL;
}

comm_req *comm_iallgather_f32(float *full, int64_t shard_n) {
    comm_req *q = request();
    if (g_size > 1) {
        int c;
        q->t = big_type(shard_n, &c);
        q->seq = wd_begin(WD_ALLGATHER, shard_n * 4);
        if (device_way()) {
            q->dop = os_dc->allgather_f32(full, shard_n);
            return q;
        }
        if (staged()) {
            q->dev = full, q->n = shard_n * g_size, q->h = host_floats(q->n);
            down(q->h + shard_n * g_rank, full + shard_n * g_rank, shard_n);
            full = q->h;
        }
        MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full, c, q->t, MPI_COMM_WORLD, &q->r);
    }
    return q;
}

comm_req *comm_ireduce_scatter_sum_f32(float *full, float *shard, int64_t shard_n) {
    comm_req *q = request();
    q->ring = 1;
    q->seq = g_size > 1 ? wd_begin(WD_REDUCE_SCATTER, shard_n * 4 * g_size) : -1;
    if (device_way()) {
        q->dop = os_dc->reduce_scatter_sum_f32(full, shard, shard_n);
        return q;
    }
    if (staged()) {   // the whole bucket down, the ring on the host, its slice of the sum up
        q->dev = shard, q->n = shard_n, q->h = host_floats(shard_n), q->h2 = host_floats(shard_n * g_size);
        down(q->h2, full, shard_n * g_size);
        full = q->h2, shard = q->h;
    }
    // every step receives into shard, and the last one writes the sum there (ring_advance)
    ring_start(&q->q, full, shard, shard, shard_n, q->seq);
    return q;
}

int comm_test(comm_req *q) {
    if (!q || q->done) return 1;
    int flag = 0;
    if (q->dop) {   // ended on the device: later compute is ordered after it anyway; joined for clarity
        if (!test_or_die(q->dop)) return 0;
        os_dc->join(q->dop);
        os_dc->release(q->dop);
        q->dop = NULL;
        return q->done = 1;
    }
    if (!q->ring) {
        MPI_Test(&q->r, &flag, MPI_STATUS_IGNORE);
        if (flag) unstage(q);
        return q->done = flag;
    }
    while (q->q.k < g_size - 1) {   // advance the ring as far as its messages have arrived
        MPI_Testall(q->q.nr, q->q.r, &flag, MPI_STATUSES_IGNORE);
        if (!flag) return 0;
        ring_advance(&q->q);
    }
    ring_finish(&q->q);
    unstage(q);
    return q->done = 1;
}

void comm_wait(comm_req *q) {
    if (!q) return;
    if (q->dop) device_join(q->dop, q->seq);
    else if (!q->done && q->ring) ring_complete(&q->q);
    else if (!q->done && q->r != MPI_REQUEST_NULL) {
        wd_wait(&q->r, 1, q->seq);
    }
    unstage(q);
    free_type(q->t);
    os_free(q);
}

void comm_reduce_scatter_sum_f32(float *full, float *shard, int64_t shard_n) {
    comm_wait(comm_ireduce_scatter_sum_f32(full, shard, shard_n));
}

// the start-up agreement's collectives (src/train/agree.c), named as such by the watchdog
void comm_agree_allgather_bytes(const void *in, void *out, int64_t bytes) {
    allgather_bytes(in, out, bytes, WD_AGREE_OPTIONS);
}
void comm_agree_bcast(void *buf, int64_t bytes, int root) { bcast(buf, bytes, root, WD_AGREE_OPTIONS); }

int comm_any_failed(int local_failed) {
    int64_t v = local_failed ? 1 : 0;
    allreduce(&v, 1, MPI_INT64_T, 8, MPI_SUM, WD_AGREE_STATUS);
    return (int)v;
}

// ---- Device collectives (the device transport, kernels/devcomm.h: NCCL) ----
// Each collective gets its watchdog sequence number like any other and is enqueued on the transport's stream after
// the compute stream's work so far. comm_wait (and the blocking collectives) only make the compute stream wait for
// its end (join: no host wait, so the prefetch and the background reduce-scatter overlap compute as on the CPU)
// and put it on the watch list below; comm_test asks whether it ended. The host observes the device only in the
// backend's download, which polls through device_host_wait: while it waits, the oldest collective still running is
// watched against --ddp_timeout (counted from the wait, as wd_wait does) and the communicator's asynchronous error
// is polled; at the deadline the watchdog aborts the communicator (ncclCommAbort), names the collective and the
// ranks that did not arrive, and ends the job.
#define WATCH 32
static struct {
    os_dc_op *h;
    int64_t seq;
} g_watch[WATCH];
static int g_watch_head, g_watch_n;

static void device_abort(void) {
    if (device_way()) os_dc->abort();
}

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

static void device_drain(void) {
    for (retire(); g_watch_n; retire()) {
        host_wait w = {NULL, NULL, g_watch[g_watch_head].seq};
        wd_poll(oldest_ended, &w, w.seq);
    }
}

// every rank's host, GPU and whether it can load the transport, gathered; the way chosen from them (the same on
// every rank); NCCL's communicator opened from rank 0's id
static void transport_setup(void) {
    if (g_size < 2) return;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    int64_t mine[3] = {(int64_t)os_fnv1a(OS_FNV_BASIS, host, strlen(host)), os_dc ? os_dc->device() : -1, 0};
    char load_err[1024] = "";
    if (os_dc && mine[1] >= 0 && os_knobs()->comm != OS_COMM_MPI) {
        mine[2] = os_dc->load() == 0;
        if (!mine[2]) snprintf(load_err, sizeof load_err, "%s", os_errmsg());
    }
    int64_t *all = os_alloc(sizeof mine * (size_t)g_size, "ranks' devices");
    // like wd_init's, right after MPI_Init and outside the watchdog's numbering: the collectives' sequence numbers
    // (and so every watchdog message) are those of a run before the device transport existed
    MPI_Allgather(mine, 3, MPI_INT64_T, all, 3, MPI_INT64_T, MPI_COMM_WORLD);
    comm_peer *p = os_alloc(sizeof *p * (size_t)g_size, "ranks' devices");
    for (int r = 0; r < g_size; r++) p[r] = (comm_peer){(uint64_t)all[3 * r], (int)all[3 * r + 1], (int)all[3 * r + 2]};
    char why[512];
    int way = comm_choose_way(p, g_size, os_knobs()->comm, why, sizeof why);
    os_free(all), os_free(p);
    if (way < 0) {   // every rank decided the same: each says why, the ranks without the library their reason
        if (g_rank == 0 || load_err[0])
            fprintf(stderr, "omnishard: rank %d: %s\n", g_rank, load_err[0] ? load_err : os_errmsg());
        comm_finalize();
        exit(2);
    }
    if (why[0]) os_info("%s", why);
    if (way != COMM_WAY_DEVICE) return;
    char id[256];
    OS_ASSERT(os_dc->id_bytes <= (int64_t)sizeof id);
    if (g_rank == 0 && os_dc->make_id(id) < 0) os_die_err();
    comm_bcast(id, os_dc->id_bytes, 0);
    pd_arm("ncclCommInitRank", wd_timeout());   // every rank must join: bounded like MPI_Init
    if (os_dc->open(id, g_size, g_rank) < 0) os_die_err();
    pd_disarm();
    g_way = COMM_WAY_DEVICE;
    wd_set_abort(device_abort);
    os_dc_host_wait = device_host_wait;
}
