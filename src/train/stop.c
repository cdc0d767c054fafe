// Ending a run on purpose on every rank at the same point (train/stop.h).
#include "train/stop.h"
#include "core/err.h"
#include "io/runfiles.h"
#include "zero/comm.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// read by the signal handler: only sig_atomic_t flags and buffers that are complete before they are published
static volatile sig_atomic_t g_step, g_note_cur;
#define g_sig os_stop_signal   // core/err.h: the watchdog reads it too
static char g_prefix[64], g_of_total[32];
static char g_note[2][8500];   // "Last complete checkpoint: ..." (the handler reads g_note[g_note_cur])
// read by the collective paths only
static char g_ckpt[4200], g_write_msg[4096];
static int64_t g_ckpt_step = -1, g_total;
static volatile sig_atomic_t g_started, g_final;
static int g_write_failed;

static size_t put(char *b, size_t n, size_t cap, const char *s) {
    while (*s && n + 1 < cap) b[n++] = *s++;
    return n;
}

static void on_signal(int sig) {
    int saved = errno;
    if (g_sig) {   // a second signal: the default action, now
        signal(sig, SIG_DFL);
        raise(sig);
        errno = saved;
        return;
    }
    g_sig = sig;
    char b[9000], num[24];
    int i = sizeof num - 1;
    long v = g_step;
    num[i] = 0;
    do num[--i] = (char)('0' + v % 10), v /= 10;
    while (v && i > 0);
    size_t n = put(b, 0, sizeof b, g_prefix);
    n = put(b, n, sizeof b, sig == SIGINT ? "SIGINT" : "SIGTERM");
    if (g_final) {
        n = put(b, n, sizeof b, " received during the final save (the last checkpoint and final_model): it is not "
                                "interrupted; the run completes and exits 0 (a second signal stops at once, leaving "
                                "what is being written incomplete). ");
    } else {
        n = put(b, n, sizeof b, g_started ? " received during step " : " received before the first step");
        if (g_started) n = put(b, n, sizeof b, num + i), n = put(b, n, sizeof b, g_of_total);
        n = put(b, n, sizeof b, "; stopping at the end of the step when every rank reaches it, at once if a rank has "
                                "died (a second signal stops at once). ");
    }
    n = put(b, n, sizeof b, g_note[g_note_cur]);
    b[n++] = '\n';
    if (write(2, b, n) < 0) {
    }
    errno = saved;
}

void os_stop_install(void) {
    const char *nl = isatty(2) ? "\n" : "";   // after the progress line, which has no newline on a terminal
    if (os_rank >= 0) snprintf(g_prefix, sizeof g_prefix, "%somnishard: rank %d: ", nl, os_rank);
    else snprintf(g_prefix, sizeof g_prefix, "%somnishard: ", nl);
    if (g_ckpt_step < 0) snprintf(g_note[g_note_cur], sizeof g_note[0], "No checkpoint has been written yet.");
    comm_set_stop_note(g_note[g_note_cur]);
    os_on_stop_signals(on_signal);
}

void os_stop_step(int64_t step, int64_t total) {
    if (total != g_total) {   // before g_started is set, the handler does not read g_of_total
        g_started = 0;
        snprintf(g_of_total, sizeof g_of_total, " of %lld", (long long)total);
        g_total = total;
    }
    g_step = (sig_atomic_t)step;
    g_started = 1;
}

void os_stop_checkpoint(const char *dir, int64_t step) {
    snprintf(g_ckpt, sizeof g_ckpt, "%s", dir);
    g_ckpt_step = step;
    int next = !g_note_cur;
    snprintf(g_note[next], sizeof g_note[next], "Last complete checkpoint: %s (continue with --resume_from_checkpoint %s)",
             dir, dir);
    g_note_cur = next;
    comm_set_stop_note(g_note[next]);
}

void os_stop_final(int done) {
    g_final = !done;
    if (done && g_sig)
        os_report("%s received during the final save was not acted on: the run completed", g_sig == SIGINT ? "SIGINT" : "SIGTERM");
}

void os_stop_write_failed(void) {
    if (g_write_failed) return;
    g_write_failed = 1;
    snprintf(g_write_msg, sizeof g_write_msg, "%s", os_errmsg());
}

// rank 0: where the run stands and how to continue it; `step` is the step reached, done (during == 0) or not
static void summary(int64_t step, int during, const char *cause) {
    if (!g_started) {
        os_info("omnishard sft: stopped (%s) before the first step", cause);
        return;
    }
    char where[96];
    snprintf(where, sizeof where, "%s step %lld of %lld", during ? "during" : "after", (long long)step, (long long)g_total);
    if (g_ckpt_step < 0)
        os_info("omnishard sft: stopped (%s) %s; no checkpoint has been written, so nothing of this run can be "
                "continued", cause, where);
    else
        os_info("omnishard sft: stopped (%s) %s; last complete checkpoint: %s (step %lld%s); continue with: "
                "--resume_from_checkpoint %s", cause, where, g_ckpt, (long long)g_ckpt_step,
                step > g_ckpt_step ? ", the steps after it are not saved" : "", g_ckpt);
}

static _Noreturn void end_run(int code) {
    // a run that never reached its first step leaves nothing that would block its corrected re-run: what it
    // created in its directory goes (its manifest proves which; a resumed run's earlier files stay)
    if (!g_started && comm_rank() == 0) os_runfiles_undo();
    fflush(stdout);
    fflush(stderr);
    comm_finalize();
    exit(code);
}

static char g_note_text[4096];

void os_stop_note(const char *text) { snprintf(g_note_text, sizeof g_note_text, "%s", text ? text : ""); }

// every rank gets rank root's stored message (on the others prefixed with the rank) and prints it
static void share_and_report(int root) {
    char msg[4096];
    snprintf(msg, sizeof msg, "%s", os_errmsg());
    comm_bcast(msg, sizeof msg, root);
    if (root == comm_rank()) os_report("%s", msg);
    else os_report("stopping because rank %d failed: %s", root, msg);
    if (*g_note_text && !g_started && comm_rank() == 0) os_report("besides: %s", g_note_text);
}

void os_stop_if_failed(int rc) {
    // the lowest rank that failed on its own, else the lowest that only echoes another rank's failure
    int64_t N = comm_size(), v = rc >= 0 ? 2 * N : os_err_is_echo() ? N + comm_rank() : comm_rank();
    comm_allreduce_min_i64(&v, 1);
    if (v == 2 * N) return;
    share_and_report((int)(v % N));
    if (g_started) summary(g_step, 1, "error");
    end_run(g_sig && !g_started ? 128 + g_sig : 1);   // a start-up phase cut short by a signal: the signal's status
}

void os_stop_boundary(int64_t done) {
    int64_t N = comm_size(), r = comm_rank();
    int64_t v[2] = {g_write_failed ? r : N, g_sig ? r * 64 + g_sig : INT64_MAX};
    comm_allreduce_min_i64(v, 2);
    if (v[0] < N) {
        if (g_write_failed) os_errf("%s", g_write_msg);
        share_and_report((int)v[0]);
        summary(done, 0, "a write failed");
        end_run(1);
    }
    if (v[1] == INT64_MAX) return;
    int sig = (int)(v[1] % 64);
    char cause[64];
    snprintf(cause, sizeof cause, "%s", sig == SIGINT ? "SIGINT" : "SIGTERM");
    if (N > 1) snprintf(cause + strlen(cause), sizeof cause - strlen(cause), " received by rank %d", (int)(v[1] / 64));
    summary(done, 0, cause);
    end_run(128 + sig);
}
