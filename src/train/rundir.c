// Run directories (train/rundir.h).
#include "train/rundir.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/atomic.h"
#include "train/stop.h"
#include "zero/comm.h"
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define LOCK_NAME ".omnishard.lock"   // io/dirlock.c's

// 1 + the highest N of the vN-* entries of dir (1 when none, or dir does not exist yet)
static long next_version(const char *dir) {
    long top = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char *end;
        long v = e->d_name[0] == 'v' ? strtol(e->d_name + 1, &end, 10) : 0;
        if (v > top && end != e->d_name + 1 && *end == '-') top = v;
    }
    if (d) closedir(d);
    return top + 1;
}

static int make_version_dir(const char *output_dir, char *run_dir, size_t n) {
    if (os_mkdir_p(output_dir) < 0) return -1;
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    for (long v = next_version(output_dir);; v++) {   // another job may take the same number at the same time
        if ((size_t)snprintf(run_dir, n, "%s/v%ld-%s", output_dir, v, stamp) >= n)
            return os_errf("%s: --add_version: the path is too long", output_dir);
        if (mkdir(run_dir, 0777) == 0) return 0;
        if (errno != EEXIST) return os_errf("%s: cannot create the run directory: %s", run_dir, strerror(errno));
    }
}

void os_rundir_version(const char *output_dir, int add_version, char *run_dir, size_t n) {
    snprintf(run_dir, n, "%s", output_dir);
    if (!add_version) return;
    char buf[PATH_MAX] = {0};
    os_stop_if_failed(comm_rank() == 0 ? make_version_dir(output_dir, buf, sizeof buf) : 0);
    comm_bcast(buf, sizeof buf, 0);
    snprintf(run_dir, n, "%s", buf);
    if (comm_rank() == 0) os_info("omnishard sft: --add_version: this run writes into %s", run_dir);
}

// a file or folder omnishard sft writes into its run directory
static int ours(const char *name) {
    static const char *const files[] = {"logging.jsonl", "args.json", "final_model", "images", "loss.svg"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (!strcmp(name, files[i])) return 1;
    return (!strncmp(name, "checkpoint-", 11) && name[11] >= '0' && name[11] <= '9') || !strncmp(name, "final_model.", 12) ||
           !strncmp(name, "logging.jsonl.", 14);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// the entries of dir but the lock, sorted; *n = count (0 when dir does not exist)
static char **entries(const char *dir, int *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    int cap = 0;
    char **e = NULL;
    for (struct dirent *x; (x = readdir(d));) {
        if (!strcmp(x->d_name, ".") || !strcmp(x->d_name, "..") || !strcmp(x->d_name, LOCK_NAME)) continue;
        if (*n == cap) {
            char **g = os_alloc(sizeof(char *) * (size_t)(cap = cap ? 2 * cap : 16), "directory listing");
            if (*n) memcpy(g, e, sizeof(char *) * (size_t)*n);
            os_free(e);
            e = g;
        }
        size_t k = strlen(x->d_name) + 1;
        e[*n] = memcpy(os_alloc(k, "directory entry"), x->d_name, k);
        ++*n;
    }
    closedir(d);
    if (*n) qsort(e, (size_t)*n, sizeof *e, by_name);
    return e;
}

static void free_entries(char **e, int n) {
    for (int i = 0; i < n; i++) os_free(e[i]);
    os_free(e);
}

// "a, b, c and 4 more" of the entries whose ours() is `which` (-1: all) into buf
static void list_names(char **e, int n, int which, char *buf, size_t cap) {
    size_t k = 0;
    int shown = 0, more = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        if (which >= 0 && ours(e[i]) != which) continue;
        if (shown == 8 || k + strlen(e[i]) + 8 >= cap) {
            more++;
            continue;
        }
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", shown++ ? ", " : "", e[i]);
    }
    if (more) snprintf(buf + k, cap - k, " and %d more", more);
}

// 1 when the checkpoint path's parent directory is dir (the same directory, however spelt)
static int resumes_from(const char *dir, const char *resume_from) {
    if (!resume_from) return 0;
    char ck[PATH_MAX], parent[PATH_MAX], d[PATH_MAX];
    if (!realpath(resume_from, ck) || !realpath(dir, d)) return 0;
    snprintf(parent, sizeof parent, "%s", ck);
    return !strcmp(dirname(parent), d);
}

// the highest checkpoint-N among the entries ("" when none)
static const char *last_checkpoint(char **e, int n) {
    const char *best = "";
    long long top = -1;
    for (int i = 0; i < n; i++) {
        char *end;
        long long s = strncmp(e[i], "checkpoint-", 11) ? -1 : strtoll(e[i] + 11, &end, 10);
        if (s > top && !*end) top = s, best = e[i];
    }
    return best;
}

static int refuse(const char *dir, const char *resume_from, char **e, int n) {
    char names[1024], hint[PATH_MAX + 160] = "";
    list_names(e, n, 1, names, sizeof names);
    const char *ck = last_checkpoint(e, n);
    if (*ck && !resume_from) snprintf(hint, sizeof hint, ", or --resume_from_checkpoint %s/%s to continue it", dir, ck);
    return os_errf("%s: the output directory holds an earlier run: %s; one run per directory, never two mixed: give "
                   "--overwrite_output_dir true to remove the earlier run's files first, --add_version true to write "
                   "into a new %s/vN-... folder, or another --output_dir%s%s", dir, names, dir, hint,
                   resume_from ? " (a resumed run may write only into the directory of its checkpoint, or an empty one)" : "");
}

int os_rundir_claim(const char *dir, const char *resume_from, int overwrite) {
    int n, runs = 0;
    char **e = entries(dir, &n);
    for (int i = 0; i < n; i++) runs += ours(e[i]);
    int rc = 0;
    if (!runs) {   // empty, new, or only files that are no run's (left alone)
    } else if (resumes_from(dir, resume_from)) {
        if (overwrite)
            rc = os_errf("%s: --overwrite_output_dir true would remove the checkpoint this run resumes (%s); leave it out "
                         "to continue the run in its directory, or give another --output_dir", dir, resume_from);
    } else if (!overwrite) {
        rc = refuse(dir, resume_from, e, n);
    } else {
        char removed[1024], kept[1024], path[PATH_MAX + 256];
        list_names(e, n, 1, removed, sizeof removed);
        list_names(e, n, 0, kept, sizeof kept);
        for (int i = 0; i < n && rc == 0; i++) {
            if (!ours(e[i])) continue;
            snprintf(path, sizeof path, "%s/%s", dir, e[i]);
            rc = os_rm_rf(path);
            if (rc < 0) os_err_ctx("--overwrite_output_dir: %s", path);
        }
        if (rc == 0 && *removed)
            os_info("omnishard sft: --overwrite_output_dir: removed the earlier run's %s from %s", removed, dir);
        if (rc == 0 && *kept) os_info("omnishard sft: --overwrite_output_dir: kept %s in %s (not written by omnishard sft)", kept, dir);
    }
    free_entries(e, n);
    return rc;
}
