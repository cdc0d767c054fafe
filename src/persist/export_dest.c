// Where omnishard export may write, and the temporaries a killed export leaves (persist/export.h).
#include "core/err.h"
#include "io/atomic.h"
#include "persist/export.h"
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_DEPTH = 8 };   // run directories nest checkpoints two deep (OUT/vN-*/checkpoint-N); symlinks not followed

// 1 and *found = the first directory at or under dir (depth levels) that holds a checkpoint (a manifest.json)
static int holds_checkpoint(const char *dir, int depth, char *found, size_t n) {
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (lstat(path, &st) == 0) return snprintf(found, n, "%s", dir), 1;
    DIR *d = depth > 0 ? opendir(dir) : NULL;
    int hit = 0;
    for (struct dirent *e; d && !hit && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path) continue;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) hit = holds_checkpoint(path, depth - 1, found, n);
    }
    if (d) closedir(d);
    return hit;
}

// "a, b, c and N more": the entries of dir into buf; the count of entries
static int list_entries(const char *dir, char *buf, size_t cap) {
    DIR *d = opendir(dir);
    size_t k = 0;
    int count = 0;
    buf[0] = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (count++ < 6 && k + strlen(e->d_name) + 16 < cap) k += (size_t)snprintf(buf + k, cap - k, "%s%s", k ? ", " : "", e->d_name);
    }
    if (d) closedir(d);
    if (count > 6 && k + 24 < cap) snprintf(buf + k, cap - k, " and %d more", count - 6);
    return count;
}

int os_export_check_dest(const char *checkpoint, const char *out, int overwrite) {
    struct stat st;
    if (lstat(out, &st) != 0) return errno == ENOENT ? 0 : os_errf("--output_dir %s: cannot stat: %s", out, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return os_errf("--output_dir %s: exists and is not a directory", out);
    char o[PATH_MAX], c[PATH_MAX], names[512], found[PATH_MAX];
    if (!realpath(out, o)) return os_errf("--output_dir %s: cannot resolve: %s", out, strerror(errno));
    size_t lo = strlen(o);
    if (realpath(checkpoint, c) && !strncmp(c, o, lo) && (c[lo] == '/' || !c[lo] || lo == 1))
        return os_errf("--output_dir %s: holds the checkpoint being read (%s); export never replaces it: give "
                       "another directory", out, checkpoint);
    if (!list_entries(out, names, sizeof names)) return 0;
    if (holds_checkpoint(out, MAX_DEPTH, found, sizeof found))
        return os_errf("--output_dir %s: holds a checkpoint (%s); export never replaces a directory with checkpoints "
                       "(not even with --overwrite_output_dir true): give another directory", out, found);
    if (!overwrite)
        return os_errf("--output_dir %s: exists and is not empty (%s); give a new or empty directory, or "
                       "--overwrite_output_dir true to replace its contents", out, names);
    return 0;
}

void os_export_cleanup(const char *out, int any_pid) {
    char buf[PATH_MAX], parent[PATH_MAX], path[PATH_MAX + 300];
    snprintf(buf, sizeof buf, "%s", out);
    snprintf(parent, sizeof parent, "%s", dirname(buf));
    snprintf(buf, sizeof buf, "%s", out);
    const char *base = basename(buf);
    size_t nb = strlen(base);
    DIR *d = opendir(parent);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *tail = e->d_name + nb, *digits = tail + 5;
        if (strncmp(e->d_name, base, nb) || strncmp(tail, ".tmp.", 5) || !*digits || digits[strspn(digits, "0123456789")])
            continue;
        long pid = strtol(digits, NULL, 10);
        if (!any_pid && !(pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH)) continue;   // a live export's
        snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
        if (os_rm_rf(path) == 0) os_info("omnishard: removed %s (left by a killed write of %s)", path, out);
        else os_info("omnishard: WARNING: could not remove %s: %s", path, os_errmsg());
    }
    if (d) closedir(d);
}
