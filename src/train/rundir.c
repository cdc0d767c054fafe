// Run directories (train/rundir.h).
#include "train/rundir.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/atomic.h"
#include "io/runfiles.h"
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

// 1 + the highest N of the vN-* entries of dir (0 when none, or dir does not exist yet: the first is v0, as ms-swift)
static long next_version(const char *dir) {
    long top = -1;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char *end = NULL;
        long v = e->d_name[0] == 'v' && e->d_name[1] >= '0' && e->d_name[1] <= '9' ? strtol(e->d_name + 1, &end, 10) : -1;
        if (v > top && end && *end == '-') top = v;
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

// 1 when omnishard sft may write an entry of this name into its run directory (tb: TensorBoard's default runs/):
// an entry there that omnishard cannot prove it wrote is in the way
static int written_here(const char *name, int tb) {
    static const char *const files[] = {"logging.jsonl", "args.json", "final_model", OS_RUNFILES};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (!strcmp(name, files[i])) return 1;
    return (tb && !strcmp(name, "runs")) || !strncmp(name, "final_model.", 12) ||
           (!strncmp(name, "checkpoint-", 11) && name[11] >= '0' && name[11] <= '9');
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// the entries of dir but the lock and the manifest, sorted; *n = count (0 when dir does not exist)
static char **entries(const char *dir, int *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    int cap = 0;
    char **e = NULL;
    for (struct dirent *x; (x = readdir(d));) {
        if (!strcmp(x->d_name, ".") || !strcmp(x->d_name, "..") || !strcmp(x->d_name, LOCK_NAME) ||
            !strcmp(x->d_name, OS_RUNFILES))
            continue;
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

// what the claim found of an entry
enum { FOREIGN, OURS, IN_THE_WAY };

// "a, b, c and 4 more" of the entries of kind `which` into buf; with why: each entry's reason in parentheses
static void list_names(char **e, const int *kind, char (*why)[256], int n, int which, char *buf, size_t cap) {
    size_t k = 0;
    int shown = 0, more = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        if (kind[i] != which) continue;
        size_t need = strlen(e[i]) + (why ? strlen(why[i]) + 3 : 0) + 8;
        if (shown == 8 || k + need >= cap) {
            more++;
            continue;
        }
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", shown++ ? ", " : "", e[i]);
        if (why) k += (size_t)snprintf(buf + k, cap - k, " (%s)", why[i]);
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

// the highest checkpoint-N among the entries of kind OURS ("" when none)
static const char *last_checkpoint(char **e, const int *kind, int n) {
    const char *best = "";
    long long top = -1;
    for (int i = 0; i < n; i++) {
        char *end;
        long long s = kind[i] != OURS || strncmp(e[i], "checkpoint-", 11) ? -1 : strtoll(e[i] + 11, &end, 10);
        if (s > top && !*end) top = s, best = e[i];
    }
    return best;
}

static int refuse(const char *dir, const char *resume_from, char **e, const int *kind, int n) {
    char names[1024], hint[PATH_MAX + 160] = "";
    list_names(e, kind, NULL, n, OURS, names, sizeof names);
    const char *ck = last_checkpoint(e, kind, n);
    if (*ck && !resume_from) snprintf(hint, sizeof hint, ", or --resume_from_checkpoint %s/%s to continue it", dir, ck);
    return os_errf("%s: the output directory holds an earlier run: %s; one run per directory, never two mixed: give "
                   "--overwrite_output_dir true to remove the earlier run's files first, --add_version true to write "
                   "into a new %s/vN-... folder, or another --output_dir%s%s", dir, names, dir, hint,
                   resume_from ? " (a resumed run may write only into the directory of its checkpoint, or an empty one)" : "");
}

static int in_the_way(const char *dir, char **e, const int *kind, char (*why)[256], int n, int count) {
    char names[2048];
    list_names(e, kind, why, n, IN_THE_WAY, names, sizeof names);
    const char *them = count > 1 ? "them" : "it";
    return os_errf("%s: %s %s in the way of what this run writes, and omnishard cannot prove it wrote %s; it deletes "
                   "and overwrites only what it wrote itself, so nothing was touched: move %s away, or give "
                   "--add_version true or another --output_dir", dir, names, count > 1 ? "are" : "is", them, them);
}

// --overwrite_output_dir: the earlier run's entries (proven) and its event files outside dir removed, each named
static int overwrite(const char *dir, char **e, const int *kind, int n) {
    char removed[1024], kept[1024], path[PATH_MAX + 256];
    list_names(e, kind, NULL, n, OURS, removed, sizeof removed);
    list_names(e, kind, NULL, n, FOREIGN, kept, sizeof kept);
    int rc = 0, outside = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (kind[i] != OURS) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e[i]);
        if ((rc = os_runfiles_remove(path)) < 0) os_err_ctx("--overwrite_output_dir");
    }
    for (const char *x; rc == 0 && (x = os_runfiles_external(0));) {   // --logging_dir's event files
        snprintf(path, sizeof path, "%s", x);
        char why[256];
        if (os_runfiles_proven(path, why, sizeof why)) {
            if ((rc = os_runfiles_remove(path)) == 0) os_info("omnishard sft: --overwrite_output_dir: removed the earlier run's %s", path), outside++;
        } else {
            os_info("omnishard sft: --overwrite_output_dir: kept %s (%s)", path, why);
            rc = os_runfiles_forget(path);
        }
    }
    if (rc == 0 && *removed)
        os_info("omnishard sft: --overwrite_output_dir: removed the earlier run's %s from %s", removed, dir);
    if (rc == 0 && *kept) os_info("omnishard sft: --overwrite_output_dir: kept %s in %s (not written by omnishard sft)", kept, dir);
    return rc;
}

// a run resuming a checkpoint of dir (its own run directory): the record continues (a directory without the
// manifest, of an older omnishard, is adopted: its run files recorded as they are); an unproven entry is kept, and a
// save that meets one fails naming it
static int claim_resumed(const char *dir, const char *resume_from, int overwrite_it, int tb, int manifest, char **e, int n) {
    if (overwrite_it)
        return os_errf("%s: --overwrite_output_dir true would remove the checkpoint this run resumes (%s); leave it out "
                       "to continue the run in its directory, or give another --output_dir", dir, resume_from);
    if (manifest < 0)
        return os_errf("%s; omnishard cannot tell which files of %s it wrote: move it away to continue the run (the "
                       "run's files are then adopted as they are)", os_errmsg(), dir);
    if (manifest == 1) return 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, e[i]);
        if (written_here(e[i], tb)) rc = os_runfiles_adopt(path);
    }
    if (rc == 0) os_info("omnishard sft: %s had no %s (an older omnishard's run): its run files are recorded in a new "
                         "one, as they are", dir, OS_RUNFILES);
    return rc;
}

int os_rundir_claim(const char *dir, const char *resume_from, int overwrite_it, int tb) {
    int n, ours = 0, blocked = 0;
    char **e = entries(dir, &n);
    int manifest = os_runfiles_open(dir, "sft"), rc = 0;
    if (resumes_from(dir, resume_from)) {
        rc = claim_resumed(dir, resume_from, overwrite_it, tb, manifest, e, n);
        free_entries(e, n);
        return rc;
    }
    int *kind = os_alloc(sizeof(int) * (size_t)(n + 1), "directory listing");
    char (*why)[256] = os_alloc(sizeof *why * (size_t)(n + 1), "directory listing");
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, e[i]);
        int proven = manifest == 1 && os_runfiles_proven(path, why[i], sizeof why[i]);
        if (manifest != 1) snprintf(why[i], sizeof why[i], "%s %s", manifest ? "unreadable" : "no", OS_RUNFILES);
        kind[i] = proven ? OURS : written_here(e[i], tb) ? IN_THE_WAY : FOREIGN;
        ours += kind[i] == OURS, blocked += kind[i] == IN_THE_WAY;
    }
    if (manifest < 0)
        rc = os_errf("%s; omnishard cannot tell which files of %s it wrote, so it touches none: move the directory's "
                     "files away, or give --add_version true or another --output_dir", os_errmsg(), dir);
    else if (blocked) rc = in_the_way(dir, e, kind, why, n, blocked);
    else if (ours && !overwrite_it) rc = refuse(dir, resume_from, e, kind, n);
    else {
        rc = overwrite_it ? overwrite(dir, e, kind, n) : 0;
        if (rc == 0) rc = os_runfiles_reset();   // a new run: its own record
    }
    os_free(kind), os_free(why);
    free_entries(e, n);
    return rc;
}
