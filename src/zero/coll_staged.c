// MPI through host buffers (coll_staged.h) over coll_inplace's collectives.
#include "zero/coll_staged.h"
#include "zero/coll_inplace.h"
#include "core/alloc.h"
#include "kernels/ops.h"
#include <string.h>

static int g_rank, g_size;
static const comm_transport *g_mpi;   // coll_inplace's table: the collectives on the host copies

static float *host_floats(int64_t n) { return os_alloc_uninit(sizeof(float) * (size_t)n, "host staging buffer"); }
static void down(float *h, const float *d, int64_t n) { os_k->download(h, d, (int64_t)sizeof(float) * n); }
static void up(float *d, const float *h, int64_t n) { os_k->upload(d, h, (int64_t)sizeof(float) * n); }

static void allreduce_sum_f32(float *b, int64_t n, int64_t seq) {
    float *h = host_floats(n);
    down(h, b, n);
    g_mpi->allreduce_sum_f32(h, n, seq);
    up(b, h, n);
    os_free(h);
}

static void allgather_f32(float *full, int64_t shard_n, int64_t seq) {
    int64_t n = shard_n * g_size, own = shard_n * g_rank;
    float *h = host_floats(n);
    down(h + own, full + own, shard_n);
    g_mpi->allgather_f32(h, shard_n, seq);
    up(full, h, n);
    os_free(h);
}

// a collective on host buffers: h (and h2, freed with it), whose n floats go to dev when it completes
typedef struct {
    comm_req base;
    comm_req *in;   // coll_inplace's request on the host buffers
    float *h, *h2, *dev;
    int64_t n;
} req;

static req *request(int64_t seq, float *dev, int64_t n) {
    req *q = os_alloc(sizeof *q, "comm request");
    memset(q, 0, sizeof *q);
    q->base.seq = seq, q->dev = dev, q->n = n, q->h = host_floats(n);
    return q;
}

// the collective has completed: what it received goes to the backend
static void unstage(req *q) {
    if (!q->h) return;
    up(q->dev, q->h, q->n);
    os_free(q->h), os_free(q->h2);
    q->h = q->h2 = NULL;
}

static comm_req *iallgather_f32(float *full, int64_t shard_n, int64_t seq) {
    req *q = request(seq, full, shard_n * g_size);
    down(q->h + shard_n * g_rank, full + shard_n * g_rank, shard_n);
    q->in = g_mpi->iallgather_f32(q->h, shard_n, seq);
    return &q->base;
}

// the whole bucket down, the ring on the host, its slice of the sum up
static comm_req *ireduce_scatter_sum_f32(float *full, float *shard, int64_t shard_n, int64_t seq) {
    req *q = request(seq, shard, shard_n);
    q->h2 = host_floats(shard_n * g_size);
    down(q->h2, full, shard_n * g_size);
    q->in = g_mpi->ireduce_scatter_sum_f32(q->h2, q->h, shard_n, seq);
    return &q->base;
}

static int test(comm_req *b) {
    req *q = (req *)b;
    if (b->done) return 1;
    if (!g_mpi->test(q->in)) return 0;
    unstage(q);
    return b->done = 1;
}

static void wait(comm_req *b) {
    req *q = (req *)b;
    g_mpi->wait(q->in);
    unstage(q);
    os_free(q);
}

static const comm_transport g_staged = COMM_TRANSPORT_TABLE(.name = "MPI through host buffers");

const comm_transport *coll_staged_open(int rank, int size) {
    g_rank = rank, g_size = size;
    g_mpi = coll_inplace_open(rank, size);
    return &g_staged;
}
