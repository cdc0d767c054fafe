// MPI in place on host memory (coll_inplace.h): the all-gather, the ring reduce-scatter and the ring all-reduce.
#include "zero/coll_inplace.h"
#include "zero/watchdog.h"
#include "core/alloc.h"
#include "core/err.h"
#include "kernels/ops.h"
#include <limits.h>
#include <string.h>

static int g_rank = 0, g_size = 1;
#define CHUNK ((int64_t)1 << 30)

void mpi_allreduce(void *buf, int64_t n, MPI_Datatype t, size_t es, MPI_Op op, int64_t seq) {
    for (int64_t o = 0; o < n; o += CHUNK) {
        int64_t k = n - o < CHUNK ? n - o : CHUNK;
        MPI_Request r;
        MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + o * (int64_t)es, (int)k, t, op, MPI_COMM_WORLD, &r);
        wd_wait(&r, 1, seq);
    }
}

void mpi_bcast(void *buf, int64_t bytes, int root, int64_t seq) {
    for (int64_t o = 0; o < bytes; o += CHUNK) {
        int64_t n = bytes - o < CHUNK ? bytes - o : CHUNK;
        MPI_Request r;
        MPI_Ibcast((char *)buf + o, (int)n, MPI_BYTE, root, MPI_COMM_WORLD, &r);
        wd_wait(&r, 1, seq);
    }
}

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
typedef struct {
    float *full, *recv, *shard;   // shard: NULL (the sum's slice `rank` stays in full), or recv: the sum goes there
    int64_t shard_n, seq;
    int k, nr, tag;               // k: the step in flight (size-1: done)
    MPI_Request *r;               // 2 per chunk of the step
} ring;
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

// Large sums whose length divides into the ranks (the gradient buckets at stages 0-1) go through the same ring as
// the reduce-scatter, then an all-gather: scratch of n/size floats, where Open MPI's non-blocking all-reduce takes
// a whole temporary copy and, in place, reduces through a binomial tree; every element is summed in one fixed order.
#define RING_MIN 16384
static void allreduce_sum_f32(float *b, int64_t n, int64_t seq) {
    if (n % g_size || n < (int64_t)RING_MIN * g_size) {
        mpi_allreduce(b, n, MPI_FLOAT, 4, MPI_SUM, seq);
        return;
    }
    int64_t s = n / g_size;
    float *scratch = os_alloc_uninit(sizeof(float) * (size_t)s, "all-reduce slice");   // the ring receives into all of it
    ring q;   // the sum's slice `rank` stays in full
    ring_start(&q, b, scratch, NULL, s, seq);
    ring_complete(&q);
    os_free(scratch);
    allgather_f32(b, s, seq);
}

typedef struct {
    comm_req base;
    int ring;          // a reduce-scatter (q), else an all-gather (r, t)
    ring q;
    MPI_Request r;
    MPI_Datatype t;
} req;

static req *request(int64_t seq) {
    req *q = os_alloc(sizeof *q, "comm request");
    memset(q, 0, sizeof *q);
    q->base.seq = seq;
    q->r = MPI_REQUEST_NULL;
    q->t = MPI_FLOAT;
    return q;
}

static comm_req *iallgather_f32(float *full, int64_t shard_n, int64_t seq) {
    req *q = request(seq);
    if (g_size > 1) {
        int c;
        q->t = big_type(shard_n, &c);
        MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full, c, q->t, MPI_COMM_WORLD, &q->r);
    }
    return &q->base;
}

static comm_req *ireduce_scatter_sum_f32(float *full, float *shard, int64_t shard_n, int64_t seq) {
    req *q = request(seq);
    q->ring = 1;
    // every step receives into shard, and the last one writes the sum there (ring_advance)
    ring_start(&q->q, full, shard, shard, shard_n, seq);
    return &q->base;
}

static int test(comm_req *b) {
    req *q = (req *)b;
    if (b->done) return 1;
    int flag = 0;
    if (!q->ring) {
        if (q->r == MPI_REQUEST_NULL) flag = 1;   // one rank: nothing travelled
        else MPI_Test(&q->r, &flag, MPI_STATUS_IGNORE);
        return b->done = flag;
    }
    while (q->q.k < g_size - 1) {   // advance the ring as far as its messages have arrived
        MPI_Testall(q->q.nr, q->q.r, &flag, MPI_STATUSES_IGNORE);
        if (!flag) return 0;
        ring_advance(&q->q);
    }
    ring_finish(&q->q);
    return b->done = 1;
}

static void wait(comm_req *b) {
    req *q = (req *)b;
    if (!b->done && q->ring) ring_complete(&q->q);
    else if (!b->done && q->r != MPI_REQUEST_NULL) wd_wait(&q->r, 1, b->seq);
    free_type(q->t);
    os_free(q);
}

static const comm_transport g_inplace = COMM_TRANSPORT_TABLE(.name = "MPI in place");

const comm_transport *coll_inplace_open(int rank, int size) {
    g_rank = rank, g_size = size;
    return &g_inplace;
}
