#include "train/agree.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "io/atomic.h"
#include "zero/comm.h"
#include <stdio.h>
#include <string.h>

enum { MSG = 1000 };
typedef struct {
    int64_t rc;
    char msg[MSG];
} parse_status;

int os_agree_ok(int rc) {
    int failed = comm_any_failed(rc < 0);
    if (failed && rc == 0) os_err_echo("stopping: %d other rank(s) reported an error", failed);
    return failed ? -1 : 0;
}

int os_agree_parse(int rc) {
    int N = comm_size();
    if (N == 1) return rc;   // the message stays as it is
    parse_status mine = {.rc = rc};
    if (rc < 0) snprintf(mine.msg, MSG, "%s", os_errmsg());
    parse_status *all = os_alloc(sizeof *all * (size_t)N, "start-up agreement");
    comm_agree_allgather_bytes(&mine, all, sizeof mine);
    int failed = 0, help = 0;
    for (int r = 0; r < N; r++) failed += all[r].rc < 0, help += all[r].rc == 1;
    int out = failed ? -1 : help == N ? 1 : 0;
    int same = failed == N;   // every rank gives the same reason (one command line for all): it alone, as on 1 rank
    for (int r = 1; r < N && same; r++) same = !strcmp(all[r].msg, all[0].msg);
    if (same) out = os_errf("%s", all[0].msg);
    else if (failed || (help && help < N)) {   // one line per distinct reason, with the ranks that gave it
        char text[4000];
        size_t k = 0;
        for (int r = 0; r < N && k < sizeof text; r++) {
            if (failed ? all[r].rc >= 0 : all[r].rc != 1) continue;
            if (!failed) snprintf(all[r].msg, MSG, "--help was given to some ranks only");
            int first = 1;
            for (int q = 0; q < r && first; q++) first = !(all[q].rc == all[r].rc && !strcmp(all[q].msg, all[r].msg));
            if (!first) continue;
            k += (size_t)snprintf(text + k, sizeof text - k, "%sthe options of rank %d", k ? "; " : "", r);
            for (int q = r + 1; q < N && k < sizeof text; q++)
                if (all[q].rc == all[r].rc && (!failed || !strcmp(all[q].msg, all[r].msg)))
                    k += (size_t)snprintf(text + k, sizeof text - k, ", %d", q);
            if (k < sizeof text) k += (size_t)snprintf(text + k, sizeof text - k, ": %s", all[r].msg);
        }
        out = os_errf("%s", text);
    }
    os_free(all);
    return out;
}

// value i of rank `root`, broadcast to every rank (length first)
static char *bcast_text(const char *mine, int root) {
    int64_t len = (int64_t)strlen(mine);
    comm_agree_bcast(&len, sizeof len, root);
    char *s = os_alloc((size_t)len + 1, "start-up agreement");
    if (comm_rank() == root) memcpy(s, mine, (size_t)len);
    comm_agree_bcast(s, len, root);
    s[len] = 0;
    return s;
}

int os_agree_values(const char *const *names, const char *const *values, int n) {
    int N = comm_size();
    if (N == 1) return 0;
    int64_t *counts = os_alloc(sizeof(int64_t) * (size_t)N, "start-up agreement"), mine_n = n;
    comm_agree_allgather_bytes(&mine_n, counts, sizeof mine_n);
    int other = 0;
    while (other < N && counts[other] == n) other++;
    int64_t theirs = other < N ? counts[other] : n;
    os_free(counts);
    if (other < N)
        return os_errf("the ranks run different omnishard builds (rank %d has %lld values to agree on, rank %d %lld)",
                       comm_rank(), (long long)n, other, (long long)theirs);
    uint64_t *mine = os_alloc(sizeof(uint64_t) * (size_t)(n + 1), "start-up agreement");
    uint64_t *all = os_alloc(sizeof(uint64_t) * (size_t)(n + 1) * (size_t)N, "start-up agreement");
    for (int i = 0; i < n; i++)   // the name too: ranks of different builds may order the table differently
        mine[i] = os_fnv1a(os_fnv1a(OS_FNV_BASIS, names[i], strlen(names[i]) + 1), values[i], strlen(values[i]));
    comm_agree_allgather_bytes(mine, all, (int64_t)sizeof(uint64_t) * n);
    char text[4000];
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        int r = 1;
        while (r < N && all[(size_t)r * (size_t)n + (size_t)i] == all[i]) r++;
        if (r == N) continue;   // every rank has rank 0's value
        char *v0 = bcast_text(values[i], 0), *vr = bcast_text(values[i], r);
        if (k < sizeof text)
            k += (size_t)snprintf(text + k, sizeof text - k, "%sranks disagree on %s: rank 0 has '%s', rank %d has '%s'",
                                  k ? "; " : "", names[i], v0, r, vr);
        os_free(v0), os_free(vr);
    }
    os_free(mine), os_free(all);
    return k ? os_errf("%s", text) : 0;
}

int os_agree_table(const os_opt *opts, int n, const void *obj, const char *const *xnames, const char *const *xvalues,
                   int nx) {
    enum { V = 2048 };
    char *buf = os_alloc((size_t)n * V, "start-up agreement"), *names = os_alloc((size_t)n * 64, "start-up agreement");
    const char **nm = os_alloc(sizeof(char *) * (size_t)(n + nx), "start-up agreement");
    const char **val = os_alloc(sizeof(char *) * (size_t)(n + nx), "start-up agreement");
    int m = 0;
    for (; m < nx; m++) nm[m] = xnames[m], val[m] = xvalues[m];
    for (int i = 0, k = 0; i < n; i++) {
        if (opts[i].per_rank) continue;
        os_opts_value(&opts[i], obj, buf + (size_t)k * V, V);
        snprintf(names + (size_t)k * 64, 64, "--%s", opts[i].name);
        nm[m] = names + (size_t)k * 64, val[m] = buf + (size_t)k * V, m++, k++;
    }
    int rc = os_agree_values(nm, val, m);
    os_free(buf), os_free(names), os_free(nm), os_free(val);
    return rc;
}

int os_agree_options(const os_sft_args *a) {
    int n;
    const os_opt *opts = os_sft_options(&n);
    return os_agree_table(opts, n, a, NULL, NULL, 0);
}

void os_digest_text(int64_t bytes, uint64_t digest, char *out, size_t n) {
    snprintf(out, n, "%lld bytes, digest %016llx", (long long)bytes, (unsigned long long)digest);
}

void os_file_digest_text(const char *path, char *out, size_t n) {
    int64_t bytes;
    uint64_t h;
    if (os_file_checksum(path, &bytes, &h) < 0) snprintf(out, n, "missing");
    else os_digest_text(bytes, h, out, n);
}
