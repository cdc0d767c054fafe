// The control plane (start-up, barriers, the agreement's collectives, small sums, bytes) on MPI, and the f32
// collectives through the transport that zero/transport.c picked once (zero/collectives.h); every wait under the
// collective watchdog (watchdog.c).
#include "zero/comm.h"
#include "zero/coll_inplace.h"
#include "zero/phase_deadline.h"
#include "zero/transport.h"
#include "zero/watchdog.h"
#include "core/alloc.h"
#include "core/err.h"
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int g_rank = 0, g_size = 1, g_inited = 0, g_forced = OS_COMM_AUTO;
void comm_force_way(int forced) { g_forced = forced; }
// The f32 collectives (comm_allreduce_sum_f32, comm_allgather_f32, comm_iallgather_f32, the reduce-scatters) take
// the backend's memory (kernels/ops.h: buckets, gradients, gathered rows); how their bytes travel is the table
// chosen at comm_init (MPI in place until then: one rank)
static const comm_transport *g_t;
static const comm_transport *t(void) { return g_t ? g_t : (g_t = coll_inplace_open(g_rank, g_size)); }

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
    if (!(g_t = transport_open(g_rank, g_size, g_forced))) {   // every rank decided the same and said why
        comm_finalize();
        exit(2);
    }
}

void comm_finalize(void) {
    if (g_t && g_t->close) g_t->close();
    g_t = NULL;
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
void comm_set_phase(const char *phase) { wd_set_phase(phase); }

void comm_barrier(void) {
    if (g_size == 1) return;
    int64_t seq = wd_begin(WD_BARRIER, 0);
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    wd_wait(&r, 1, seq);
}

static void bcast(void *buf, int64_t bytes, int root, enum wd_kind kind) {
    if (g_size > 1) mpi_bcast(buf, bytes, root, wd_begin(kind, bytes));
}
void comm_bcast(void *buf, int64_t bytes, int root) { bcast(buf, bytes, root, WD_BCAST); }

static void allreduce(void *buf, int64_t n, MPI_Datatype t, size_t es, MPI_Op op, enum wd_kind kind) {
    if (g_size > 1) mpi_allreduce(buf, n, t, es, op, wd_begin(kind, n * (int64_t)es));
}
void comm_allreduce_sum_f64(double *b, int64_t n) { allreduce(b, n, MPI_DOUBLE, 8, MPI_SUM, WD_ALLREDUCE); }
void comm_allreduce_max_i64(int64_t *b, int64_t n) { allreduce(b, n, MPI_INT64_T, 8, MPI_MAX, WD_ALLREDUCE); }
void comm_allreduce_min_i64(int64_t *b, int64_t n) { allreduce(b, n, MPI_INT64_T, 8, MPI_MIN, WD_ALLREDUCE); }

// ---- The f32 collectives: the transport's (each one's watchdog number taken here, the same on every rank) ----
void comm_allreduce_sum_f32(float *b, int64_t n) {
    if (g_size > 1) t()->allreduce_sum_f32(b, n, wd_begin(WD_ALLREDUCE, n * 4));
}
void comm_allgather_f32(float *full, int64_t shard_n) {
    if (g_size > 1) t()->allgather_f32(full, shard_n, wd_begin(WD_ALLGATHER, shard_n * 4));
}
comm_req *comm_iallgather_f32(float *full, int64_t shard_n) {
    return t()->iallgather_f32(full, shard_n, g_size > 1 ? wd_begin(WD_ALLGATHER, shard_n * 4) : -1);
}
comm_req *comm_ireduce_scatter_sum_f32(float *full, float *shard, int64_t shard_n) {
    return t()->ireduce_scatter_sum_f32(full, shard, shard_n,
                                        g_size > 1 ? wd_begin(WD_REDUCE_SCATTER, shard_n * 4 * g_size) : -1);
}
int comm_test(comm_req *q) { return !q || t()->test(q); }
void comm_wait(comm_req *q) {
    if (q) t()->wait(q);
}
void comm_reduce_scatter_sum_f32(float *full, float *shard, int64_t shard_n) {
    comm_wait(comm_ireduce_scatter_sum_f32(full, shard, shard_n));
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
