#include "zero/watchdog.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/timer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// A wait first spins on MPI_Testall (as MPI_Wait would: Open MPI progresses non-blocking collectives only inside
// MPI calls, and yields the core in them when oversubscribed), reading the clock every 256 tests; after LISTEN_S it
// also listens for other ranks' reports; after SPIN_S it naps NAP_NS between tests (a nap costs at most NAP_NS
// plus a wake-up, against a wait of over a second already).
#define LISTEN_S 0.1
#define SPIN_S 1.0
#define NAP_NS 1000000L
#define HISTORY 64   // the kinds and sizes of the last HISTORY collectives, for messages
enum { TAG_STATE = 7401, TAG_DONE = 7402 };
// a state message: the last collective this rank started, the one it waits in, that one's kind, the step
enum { S_ISSUED, S_WAITING, S_KIND, S_STEP, S_N };

static const char *const kind_name[WD_NKINDS] = {
    [WD_BARRIER] = "barrier", [WD_BCAST] = "broadcast", [WD_ALLREDUCE] = "all-reduce", [WD_ALLGATHER] = "all-gather",
    [WD_REDUCE_SCATTER] = "reduce-scatter", [WD_ALLTOALL] = "all-to-all",
    [WD_AGREE_OPTIONS] = "start-up agreement on options",
    [WD_AGREE_STATUS] = "agreement on errors",
};

static int g_rank, g_size;
static double g_timeout = 1800.0;
static int64_t g_step, g_issued = -1;
static struct {
    int64_t seq, bytes;
    enum wd_kind kind;
} g_hist[HISTORY];

void wd_init(int rank, int size) { g_rank = rank, g_size = size; }
void wd_set_timeout(double seconds) { g_timeout = seconds; }
double wd_timeout(void) { return g_timeout; }
void wd_set_step(int64_t step) { g_step = step; }

int64_t wd_begin(enum wd_kind kind, int64_t bytes) {
    int64_t s = ++g_issued;
    g_hist[s % HISTORY].seq = s, g_hist[s % HISTORY].kind = kind, g_hist[s % HISTORY].bytes = bytes;
    return s;
}

static enum wd_kind kind_of(int64_t seq) { return g_hist[seq % HISTORY].kind; }

static void nap(void) {
    struct timespec t = {0, NAP_NS};
    nanosleep(&t, NULL);
}

static int pending(int tag, int *src) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &st);
    if (flag) *src = st.MPI_SOURCE;
    return flag;
}

static void send_all(int64_t *msg, int tag) {
    for (int r = 0; r < g_size; r++) {
        if (r == g_rank) continue;
        MPI_Request q;
        MPI_Isend(msg, S_N, MPI_INT64_T, r, tag, MPI_COMM_WORLD, &q);
        MPI_Request_free(&q);   // never waited for: the peer may be stopped; msg is static
    }
}

// receive every state message that has arrived; returns how many ranks have been heard from
static int collect(int64_t (*st)[S_N], int *heard) {
    int src, n = 0;
    while (pending(TAG_STATE, &src)) {
        MPI_Recv(st[src], S_N, MPI_INT64_T, src, TAG_STATE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        heard[src] = 1;
    }
    for (int r = 0; r < g_size; r++) n += heard[r];
    return n;
}

static void describe(char *out, size_t n, int64_t seq, enum wd_kind kind, int64_t step) {
    int64_t bytes = g_hist[seq % HISTORY].seq == seq ? g_hist[seq % HISTORY].bytes : -1;
    int k = snprintf(out, n, "%s #%lld", kind_name[kind], (long long)seq);
    if (bytes >= 0 && kind != WD_AGREE_OPTIONS && kind != WD_AGREE_STATUS)
        k += snprintf(out + k, n - (size_t)k, " (%lld bytes per rank)", (long long)bytes);
    snprintf(out + k, n - (size_t)k, step > 0 ? " at step %lld" : " during start-up", (long long)step);
}

// The deadline passed (trigger < 0) or rank `trigger` reported that its own did: ask every rank where it is,
// print the report, let the other reporting ranks print theirs, then end the job.
static _Noreturn void expire(int64_t seq, double waited, int trigger) {
    // a rank told to stop (SIGINT/SIGTERM: mpirun tearing the job down, Ctrl-C) that cannot finish a collective ends
    // without a report of its own; the ranks that saw the collective fail report it (docs/operations.md)
    if (os_stop_signal) _Exit(128 + os_stop_signal);
    static int64_t mine[S_N], done[S_N];
    mine[S_ISSUED] = g_issued, mine[S_WAITING] = seq, mine[S_KIND] = kind_of(seq), mine[S_STEP] = g_step;
    send_all(mine, TAG_STATE);
    int64_t(*st)[S_N] = os_alloc(sizeof *st * (size_t)g_size, "watchdog states");
    int *heard = os_alloc(sizeof(int) * (size_t)g_size, "watchdog states");
    memset(heard, 0, sizeof(int) * (size_t)g_size);
    heard[g_rank] = 1;
    memcpy(st[g_rank], mine, sizeof mine);
    double grace = g_timeout / 4 < 1 ? 1 : g_timeout / 4 > 10 ? 10 : g_timeout / 4, t0 = os_now();
    while (collect(st, heard) < g_size && os_now() - t0 < grace) nap();
    char what[160], msg[3072];
    describe(what, sizeof what, seq, kind_of(seq), g_step);
    int k = trigger < 0 ? snprintf(msg, sizeof msg, "collective watchdog: %s did not complete within %g s (--ddp_timeout)",
                                   what, g_timeout)
                        : snprintf(msg, sizeof msg, "collective watchdog: %s not complete after %.1f s; rank %d "
                                   "reported that its wait passed --ddp_timeout %g s", what, waited, trigger, g_timeout);
    // the oldest collective any rank waits in is where the job stopped; who did not start it is the cause
    int64_t oldest = seq;
    int old_rank = g_rank;
    for (int r = 0; r < g_size; r++)
        if (heard[r] && st[r][S_WAITING] < oldest) oldest = st[r][S_WAITING], old_rank = r;
    describe(what, sizeof what, oldest, (enum wd_kind)st[old_rank][S_KIND], st[old_rank][S_STEP]);
    k += snprintf(msg + k, sizeof msg - (size_t)k, "; ranks that did not arrive at %s%s:", oldest == seq ? "it" : what,
                  oldest == seq ? "" : " (the oldest collective a rank waits in)");
    int missing = 0;
    for (int r = 0; r < g_size && k < (int)sizeof msg - 200; r++)
        if (!heard[r] || st[r][S_ISSUED] < oldest)
            k += snprintf(msg + k, sizeof msg - (size_t)k, "%s rank %d%s", missing++ ? "," : "", r,
                          heard[r] ? "" : " (no answer: stopped, dead or cut off)");
    if (!missing) k += snprintf(msg + k, sizeof msg - (size_t)k, " none (every rank started it; a transfer is stuck)");
    k += snprintf(msg + k, sizeof msg - (size_t)k, "; ranks waiting:");
    for (int r = 0; r < g_size && k < (int)sizeof msg - 100; r++)
        if (heard[r])
            k += snprintf(msg + k, sizeof msg - (size_t)k, " %d in #%lld %s,", r, (long long)st[r][S_WAITING],
                          kind_name[st[r][S_KIND]]);
    msg[k - 1] = 0;
    // print, then wait until every rank heard from has printed too: the first MPI_Abort ends them all
    char line[sizeof msg + 64];
    snprintf(line, sizeof line, "omnishard: rank %d: %s", g_rank, msg);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    send_all(done, TAG_DONE);
    int *fin = os_alloc(sizeof(int) * (size_t)g_size, "watchdog states"), nfin = 1, want = 0, src;
    memset(fin, 0, sizeof(int) * (size_t)g_size);
    for (int r = 0; r < g_size; r++) want += heard[r];
    fin[g_rank] = 1;
    for (t0 = os_now(); nfin < want && os_now() - t0 < grace; nap()) {
        collect(st, heard);
        while (pending(TAG_DONE, &src)) {
            int64_t got[S_N];
            MPI_Recv(got, S_N, MPI_INT64_T, src, TAG_DONE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (heard[src] && !fin[src]) fin[src] = 1, nfin++;
        }
    }
    MPI_Abort(MPI_COMM_WORLD, 1);
    _Exit(1);
}

void wd_wait(MPI_Request *r, int n, int64_t seq) {
    int done = 0;
    MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE);
    if (done) return;
    double t0 = os_now(), t = 0;
    for (unsigned it = 1;; it++) {
        MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE);
        if (done) return;
        if (t < SPIN_S && it % 256) continue;
        t = os_now() - t0;
        if (t < LISTEN_S) continue;
        int src;
        if (pending(TAG_STATE, &src)) expire(seq, t, src);
        if (g_timeout > 0 && t >= g_timeout) expire(seq, t, -1);
        if (t < SPIN_S) continue;
        nap();
    }
}
