// The OMNISHARD_* environment variables, read once and checked (knobs.h).
#include "core/knobs.h"
#include "core/numtext.h"
#include "core/err.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// every variable, in the order of docs/operations.md's table (describe lists them in this order)
static const char *const NAMES[] = {"OMNISHARD_BF16_GEMM", "OMNISHARD_GEMM_TIMES", "OMNISHARD_HUGEPAGES", "OMNISHARD_LOGITS_ROWS", "OMNISHARD_LOG_SAMPLES",
                                    "OMNISHARD_NO_BLAS_FIX", "OMNISHARD_TOK_RANGES", "OMNISHARD_COUNT_OPS", "OMNISHARD_FAULT", "OMNISHARD_COMM",
                                    "OMNISHARD_HOME", "OMNISHARD_PYTHON"};
enum { NKNOBS = sizeof NAMES / sizeof NAMES[0] };
// variables that became options: set, they stop the program naming the option
static const char *const RETIRED[][2] = {
    {"OMNISHARD_BACKEND", "the option --device guard (sft, infer, export, mel --encoder)"},
    {"OMNISHARD_GUARD_STRICT", "the option --device guard (strict) or --device guard:lax"},
    {"OMNISHARD_HEAD_BALANCE", "the option --head_balance of sft (--head_balance false: the head's rows stay on their rank)"},
};

static os_knobs_t g;
static char g_problems[2048], g_notes[512];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void problem(const char *fmt, const char *name, const char *v) {
    size_t k = strlen(g_problems);
    if (k < sizeof g_problems) k += (size_t)snprintf(g_problems + k, sizeof g_problems - k, "%s%s: ", k ? "; " : "", name);
    if (k < sizeof g_problems) snprintf(g_problems + k, sizeof g_problems - k, fmt, v);
}

static const char *set(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

// "1" -> 1, "0" -> 0, unset -> def, else def and the problem `what`
static int zero_one(const char *name, int def, const char *what) {
    const char *v = set(name);
    if (!v) return def;
    if (!strcmp(v, "1") || !strcmp(v, "0")) return v[0] == '1';
    problem(what, name, v);
    return def;
}

static void read_fault(void) {
    const char *v = set("OMNISHARD_FAULT");
    g.fault.rank = -1;
    if (!v) return;
    int r, used = 0;
    long long s;
    char kind[8] = "error";
    int n = sscanf(v, "%d:%lld%n:%7[a-z]%n", &r, &s, &used, kind, &used);
    if (n < 2 || v[used] || r < 0 || s < -1 ||
        (strcmp(kind, "error") && strcmp(kind, "crash") && strcmp(kind, "exit") && strcmp(kind, "stall") && strcmp(kind, "term"))) {
        problem("expected RANK:STEP or RANK:STEP:KIND with STEP >= -1 and KIND error, crash, exit, stall or term (a "
                "test hook), got '%s'",
                "OMNISHARD_FAULT", v);
        return;
    }
    g.fault.rank = r, g.fault.step = s;
    snprintf(g.fault.kind, sizeof g.fault.kind, "%s", kind);
}

static void read_all(void) {
    const char *v = set("OMNISHARD_BF16_GEMM");
    if (v && strcmp(v, "onednn") && strcmp(v, "onednn_gemm") && strcmp(v, "onednn_matmul") && strcmp(v, "sgemm"))
        problem("expected onednn, onednn_gemm, onednn_matmul or sgemm (or unset: chosen from the CPU), got '%s'",
                "OMNISHARD_BF16_GEMM", v);
    else g.bf16_gemm = v;
    v = set("OMNISHARD_GEMM_TIMES");
    g.gemm_times = v && !strcmp(v, "1");
    if (v && strcmp(v, "0") && !g.gemm_times)
        snprintf(g_notes, sizeof g_notes, "OMNISHARD_GEMM_TIMES: expected 1 or 0, got '%s'; not timing the products", v);
    g.hugepages = zero_one("OMNISHARD_HUGEPAGES", 1, "expected 1 (the pool asks for huge pages, the default) or 0 (the "
                                                     "system's setting), got '%s'");
    g.log_samples = zero_one("OMNISHARD_LOG_SAMPLES", 0, "expected 1 (each step's sample ids in logging.jsonl) or 0, "
                                                         "got '%s'");
    g.no_blas_fix = getenv("OMNISHARD_NO_BLAS_FIX") != NULL;   // set, to any value (docs/performance.md)
    g.home = set("OMNISHARD_HOME"), g.python = set("OMNISHARD_PYTHON");
    if ((v = set("OMNISHARD_LOGITS_ROWS"))) {
        long long r;
        if (os_parse_decimal_int(v, 1, INT64_MAX, &r) < 0) problem("expected a positive number of rows (a test hook), got '%s'", "OMNISHARD_LOGITS_ROWS", v);
        else g.logits_rows = r;
    }
    g.tok_ranges = zero_one("OMNISHARD_TOK_RANGES", 0, "expected 1 (explicit Unicode ranges, a test hook) or 0, got '%s'");
    for (size_t i = 0; i < sizeof RETIRED / sizeof RETIRED[0]; i++)
        if (getenv(RETIRED[i][0])) {
            char fmt[256];
            snprintf(fmt, sizeof fmt, "no longer read (got '%%s'): it is %s now", RETIRED[i][1]);
            problem(fmt, RETIRED[i][0], getenv(RETIRED[i][0]));
        }
    g.count_ops = set("OMNISHARD_COUNT_OPS");
    read_fault();
    if ((v = set("OMNISHARD_COMM"))) {
        if (strcmp(v, "mpi") && strcmp(v, "nccl"))
            problem("expected mpi (the collectives through host buffers over MPI) or nccl (between GPUs over NCCL), "
                    "or unset (NCCL when every rank has a GPU of its own), got '%s'", "OMNISHARD_COMM", v);
        else g.comm = !strcmp(v, "mpi") ? OS_COMM_MPI : OS_COMM_NCCL;
    }
}

const os_knobs_t *os_knobs(void) {
    pthread_once(&g_once, read_all);
    return &g;
}

int os_knobs_check(void) {
    os_knobs();
    static int noted;
    if (g_notes[0] && !noted++) fprintf(stderr, "omnishard: %s\n", g_notes);
    return g_problems[0] ? os_errf("%s", g_problems) : 0;
}

int os_knobs_count(void) { return NKNOBS; }

const char *os_knobs_entry(int i, const char **name) {
    *name = NAMES[i];
    return getenv(NAMES[i]);
}

void os_knobs_describe(char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < NKNOBS && k < n; i++) {
        const char *name, *v = os_knobs_entry(i, &name);
        if (v) k += (size_t)snprintf(buf + k, n - k, "%s%s=%s", k ? " " : "", name, v);
    }
    if (!k) snprintf(buf, n, "(none)");
}

void os_test_fault(int rank, int64_t step) {
    const os_knobs_t *t = os_knobs();
    if (t->fault.rank != rank || t->fault.step != step) return;
    if (!strcmp(t->fault.kind, "crash")) raise(SIGSEGV);
    if (!strcmp(t->fault.kind, "exit")) _exit(3);
    if (!strcmp(t->fault.kind, "term")) {   // a SIGTERM to this rank, which goes on
        raise(SIGTERM);
        return;
    }
    while (!strcmp(t->fault.kind, "stall")) pause();
    os_die("injected fault (OMNISHARD_FAULT=%s) at step %lld", getenv("OMNISHARD_FAULT"), (long long)step);
}
