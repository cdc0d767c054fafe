#include "zero/watchdog.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/timer.h"
#include "core/rng.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

// Each rank's process id and a key of its process-id namespace (host name, boot id, pid namespace): a waiting rank
// checks, once a second, that the ranks sharing its namespace are still running, so a peer killed outright (kill -9,
// the OOM killer, a crash) ends the wait at once instead of at the deadline or mpirun's SIGKILL.
static int64_t (*g_peer)[2];
static char g_note[1024];   // "Last complete checkpoint: ..." (wd_set_note)

static int64_t namespace_key(void) {
    char host[256] = "", ns[128] = "", boot[64] = "";
    gethostname(host, sizeof host - 1);
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f && !fgets(boot, sizeof boot, f)) boot[0] = 0;
    if (f) fclose(f);
    if (n <= 0 || !boot[0]) return 0;   // unknown: no peer is checked
    uint64_t h = os_fnv1a(os_fnv1a(os_fnv1a(OS_FNV_BASIS, host, strlen(host)), ns, (size_t)n), boot, strlen(boot));
    return (int64_t)(h | 1);
}

void wd_init(int rank, int size) {
    g_rank = rank, g_size = size;
    if (size < 2) return;
    int64_t mine[2] = {getpid(), namespace_key()};
    g_peer = os_alloc(sizeof *g_peer * (size_t)size, "rank processes");
    MPI_Allgather(mine, 2, MPI_INT64_T, g_peer, 2, MPI_INT64_T, MPI_COMM_WORLD);   // right after MPI_Init
}

void wd_set_note(const char *note) { snprintf(g_note, sizeof g_note, "%s", note); }

// 1 when process pid has ended (gone, or a zombie not yet reaped)
static int ended(int64_t pid) {
    if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');   // "pid (comm) S ..."
    return p && p[1] == ' ' && p[2] == 'Z';
}

// "rank 1 (pid 123)" for each rank of this rank's namespace whose process has ended, into out; how many
static int dead_peers(char *out, size_t n) {
    int dead = 0;
    size_t k = 0;
    out[0] = 0;
    for (int r = 0; g_peer && g_peer[g_rank][1] && r < g_size; r++)
        if (r != g_rank && g_peer[r][1] == g_peer[g_rank][1] && ended(g_peer[r][0]) && k + 48 < n)
            k += (size_t)snprintf(out + k, n - k, "%srank %d (pid %lld)", dead++ ? ", " : "", r, (long long)g_peer[r][0]);
    return dead;
}
void wd_set_timeout(double seconds) { g_timeout = seconds; }
double wd_timeout(void) { return g_timeout; }
void wd_set_step(int64_t step) { g_step = step; }
static char g_phase[200];   // wd_set_phase: named instead of the step
void wd_set_phase(const char *phase) { snprintf(g_phase, sizeof g_phase, "%s", phase ? phase : ""); }

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
    if (g_phase[0]) snprintf(out + k, n - (size_t)k, " %s", g_phase);
    else snprintf(out + k, n - (size_t)k, step > 0 ? " at step %lld" : " during start-up", (long long)step);
}

// The deadline passed (trigger < 0) or rank `trigger` reported that its own did: ask every rank where it is,
// print the report, let the other reporting ranks print theirs, then end the job.
static void (*g_abort_transport)(void);
void wd_set_abort(void (*f)(void)) { g_abort_transport = f; }

static _Noreturn void expire(int64_t seq, double waited, int trigger) {
    if (g_abort_transport) g_abort_transport();
    // a rank told to stop (SIGINT/SIGTERM: mpirun tearing the job down, Ctrl-C) that cannot finish a collective ends
    // without a watchdog report of its own (the ranks that saw the collective fail report it), saying so in one line
    if (os_stop_signal) {
        char what[160];
        describe(what, sizeof what, seq, kind_of(seq), g_step);
        fprintf(stderr, "omnishard: rank %d: %s cannot complete (%s): the step will not end; ending now (exit %d, "
                "the signal received earlier). %s\n", g_rank, what,
                trigger < 0 ? "past --ddp_timeout" : "another rank reported it stuck past --ddp_timeout",
                128 + (int)os_stop_signal, g_note);
        fflush(stderr);
        _Exit(128 + os_stop_signal);
    }
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

// ranks of this host have died while this rank waits in collective seq: nothing can complete; end now
static _Noreturn void peer_died(int64_t seq, const char *dead, int n) {
    if (g_abort_transport) g_abort_transport();
    char what[160];
    describe(what, sizeof what, seq, kind_of(seq), g_step);
    int code = os_stop_signal ? 128 + (int)os_stop_signal : 1;
    fprintf(stderr, "omnishard: rank %d: %s on this host %s ended while this rank waits in %s: the job cannot "
            "continue; ending now (exit %d%s). %s\n", g_rank, dead, n > 1 ? "have" : "has", what, code,
            os_stop_signal ? ", the signal received" : "", g_note);
    fflush(stderr);
    _Exit(code);
}

void wd_poll(int (*done)(void *arg), void *arg, int64_t seq) {
    if (done(arg)) return;
    double t0 = os_now(), t = 0, check = SPIN_S;
    for (unsigned it = 1;; it++) {
        if (done(arg)) return;
        if (t < SPIN_S && it % 256) continue;
        t = os_now() - t0;
        if (t < LISTEN_S) continue;
        int src;
        if (pending(TAG_STATE, &src)) expire(seq, t, src);
        if (g_timeout > 0 && t >= g_timeout) expire(seq, t, -1);
        if (t < SPIN_S) continue;
        if (t >= check) {   // once a second: the ranks of this host still running?
            char dead[512];
            int nd = dead_peers(dead, sizeof dead);
            if (nd) peer_died(seq, dead, nd);
            check = t + 1;
        }
        nap();
    }
}

typedef struct {
    MPI_Request *r;
    int n;
} mpi_reqs;
static int mpi_done(void *arg) {
    mpi_reqs *q = arg;
    int done = 0;
    MPI_Testall(q->n, q->r, &done, MPI_STATUSES_IGNORE);
    return done;
}

void wd_wait(MPI_Request *r, int n, int64_t seq) { wd_poll(mpi_done, &(mpi_reqs){r, n}, seq); }
