// What a command wrote into its directory (io/runfiles.h).
#include "io/runfiles.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "io/atomic.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORMAT "omnishard-files-1"

static struct {
    int open, created_manifest;   // created_manifest: this process wrote the first manifest of the directory
    char dir[PATH_MAX], mpath[PATH_MAX + 64], command[32];
    cJSON *root;                  // {"format", "command", "files", "dirs", "pending"}
    cJSON *created;               // the paths this process recorded first (os_runfiles_undo)
} g;

static cJSON *arr(const char *k) { return cJSON_GetObjectItemCaseSensitive(g.root, k); }

static void empty_record(void) {
    cJSON_Delete(g.root);
    g.root = cJSON_CreateObject();
    cJSON_AddStringToObject(g.root, "format", FORMAT);
    cJSON_AddStringToObject(g.root, "command", g.command);
    cJSON_AddArrayToObject(g.root, "files");
    cJSON_AddArrayToObject(g.root, "dirs");
    cJSON_AddArrayToObject(g.root, "pending");
}

// 1 when the parsed manifest has the expected shape
static int well_formed(const cJSON *o) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "format");
    return cJSON_IsString(f) && !strcmp(f->valuestring, FORMAT) &&
           cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "files")) &&
           cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "dirs")) &&
           cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "pending"));
}

int os_runfiles_open(const char *dir, const char *command) {
    snprintf(g.dir, sizeof g.dir, "%s", dir);
    for (size_t n = strlen(g.dir); n > 1 && g.dir[n - 1] == '/';) g.dir[--n] = 0;
    snprintf(g.mpath, sizeof g.mpath, "%s/" OS_RUNFILES, g.dir);
    snprintf(g.command, sizeof g.command, "%s", command);
    g.open = 1, g.created_manifest = 0;
    cJSON_Delete(g.created);
    g.created = cJSON_CreateArray();
    empty_record();
    if (access(g.mpath, F_OK) != 0) return errno == ENOENT ? (g.created_manifest = 1, 0) : os_errf("%s: %s", g.mpath, strerror(errno));
    size_t n;
    char *text = os_read_file(g.mpath, &n);
    cJSON *o = text ? cJSON_ParseWithLength(text, n) : NULL;
    os_free(text);
    if (!o || !well_formed(o)) {
        cJSON_Delete(o);
        return os_errf("%s: not a manifest omnishard can read (expected JSON with format \"%s\")", g.mpath, FORMAT);
    }
    cJSON_Delete(g.root);
    g.root = o;
    return 1;
}

// path relative to the directory ("" for the directory itself), or absolute for a path outside it; NULL: off
static const char *rel(const char *path, char *buf, size_t n) {
    size_t k = strlen(g.dir);
    if (!strncmp(path, g.dir, k) && (path[k] == '/' || !path[k])) {
        path += k;
        while (*path == '/') path++;
        return path;
    }
    if (path[0] == '/') return path;
    char parent[PATH_MAX], res[PATH_MAX];   // a relative path outside the directory: absolute, by its folder
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash) *slash = 0;
    if (!realpath(slash ? parent : ".", res)) return NULL;
    return (size_t)snprintf(buf, n, "%s/%s", res, base) < n ? buf : NULL;
}

static void full(const char *r, char *buf, size_t n) {
    if (r[0] == '/') snprintf(buf, n, "%s", r);
    else snprintf(buf, n, "%s/%s", g.dir, r);
}

static cJSON *find(const char *list, const char *r) {
    cJSON *e;
    cJSON_ArrayForEach(e, arr(list)) {
        const cJSON *p = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "path") : e;
        if (cJSON_IsString(p) && !strcmp(p->valuestring, r)) return e;
    }
    return NULL;
}

// drop every record of r and of anything under it; 1 when there was one
static int drop(const char *r) {
    static const char *const lists[] = {"files", "dirs", "pending"};
    size_t k = strlen(r);
    int had = 0;
    for (int l = 0; l < 3; l++) {
        cJSON *a = arr(lists[l]);
        for (int i = cJSON_GetArraySize(a) - 1; i >= 0; i--) {
            cJSON *e = cJSON_GetArrayItem(a, i);
            const cJSON *p = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "path") : e;
            if (cJSON_IsString(p) && !strncmp(p->valuestring, r, k) && (!p->valuestring[k] || p->valuestring[k] == '/'))
                cJSON_DeleteItemFromArray(a, i), had = 1;
        }
    }
    return had;
}

static int save(void) {
    char *text = cJSON_PrintUnformatted(g.root);
    if (!text) return os_errf("%s: out of memory", g.mpath);
    int rc = os_write_file_atomic(g.mpath, text, strlen(text));
    cJSON_free(text);
    return rc;
}

// FNV-1a 64 of the first `bytes` bytes of path; -1 + message
static int prefix_sum(const char *path, long long bytes, uint64_t *sum) {
    enum { PIECE = 1 << 20 };
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return os_errf("%s: cannot open: %s", path, strerror(errno));
    char *buf = os_alloc_uninit(PIECE, "checksum buffer");
    uint64_t h = OS_FNV_BASIS;
    int rc = 0;
    while (bytes > 0) {
        ssize_t r = read(fd, buf, bytes < PIECE ? (size_t)bytes : PIECE);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            rc = os_errf("%s: read failed: %s", path, r < 0 ? strerror(errno) : "shorter than expected");
            break;
        }
        h = os_fnv1a(h, buf, (size_t)r), bytes -= r;
    }
    os_free(buf);
    close(fd);
    *sum = h;
    return rc;
}

static long long mtime_ns(const struct stat *st) { return (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec; }

static int add_file(const char *r, const char *path, const struct stat *st) {
    char cs[32], mt[32];
    uint64_t sum = 0;
    int with_sum = (long long)st->st_size <= OS_RUNFILES_SUM_MAX;
    if (with_sum && prefix_sum(path, (long long)st->st_size, &sum) < 0) return -1;
    snprintf(cs, sizeof cs, "%016llx", (unsigned long long)sum);
    snprintf(mt, sizeof mt, "%lld", mtime_ns(st));
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "path", r);
    cJSON_AddNumberToObject(f, "bytes", (double)st->st_size);
    cJSON_AddStringToObject(f, "mtime_ns", mt);
    if (with_sum) cJSON_AddStringToObject(f, "fnv1a64", cs);
    else cJSON_AddNullToObject(f, "fnv1a64");
    cJSON_AddItemToArray(arr("files"), f);
    return 0;
}

static int walk_record(const char *r) {
    char path[PATH_MAX + 512];
    full(r, path, sizeof path);
    struct stat st;
    if (lstat(path, &st) != 0) return os_errf("%s: cannot record it: %s", path, strerror(errno));
    if (S_ISREG(st.st_mode)) return add_file(r, path, &st);
    if (!S_ISDIR(st.st_mode)) return 0;   // omnishard writes no other kind: not recorded, so never removed
    cJSON_AddItemToArray(arr("dirs"), cJSON_CreateString(r));
    DIR *d = opendir(path);
    if (!d) return os_errf("%s: cannot list: %s", path, strerror(errno));
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[PATH_MAX];
        if ((size_t)snprintf(sub, sizeof sub, "%s%s%s", r, *r ? "/" : "", e->d_name) >= sizeof sub) continue;
        rc = walk_record(sub);
    }
    closedir(d);
    return rc;
}

// created: this process wrote it (os_runfiles_undo takes it back)
static int record(const char *path, int created) {
    if (!g.open) return 0;
    char buf[PATH_MAX];
    const char *r = rel(path, buf, sizeof buf);
    if (!r || !*r) return os_errf("%s: cannot record it in %s", path, g.mpath);
    if (!drop(r) && !find("pending", r) && created) cJSON_AddItemToArray(g.created, cJSON_CreateString(r));
    if (walk_record(r) < 0) return os_err_ctx("%s", g.mpath);
    return save();
}

int os_runfiles_record(const char *path) { return record(path, 1); }

int os_runfiles_adopt(const char *path) { return record(path, 0); }

int os_runfiles_record_appended(const char *path, long long bytes, uint64_t sum) {
    if (!g.open) return 0;
    char buf[PATH_MAX], cs[32];
    const char *r = rel(path, buf, sizeof buf);
    if (!r || !*r) return os_errf("%s: cannot record it in %s", path, g.mpath);
    if (!drop(r)) cJSON_AddItemToArray(g.created, cJSON_CreateString(r));
    snprintf(cs, sizeof cs, "%016llx", (unsigned long long)sum);
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "path", r);
    cJSON_AddNumberToObject(f, "bytes", (double)bytes);
    cJSON_AddStringToObject(f, "fnv1a64", cs);
    cJSON_AddTrueToObject(f, "append");
    cJSON_AddItemToArray(arr("files"), f);
    return save();
}

int os_runfiles_record_dir(const char *path) {
    if (!g.open) return 0;
    char buf[PATH_MAX];
    const char *r = rel(path, buf, sizeof buf);
    if (!r || !*r || r[0] == '/') return 0;   // outside the directory: its files are recorded, not the folder
    if (find("dirs", r)) return 0;
    cJSON_AddItemToArray(arr("dirs"), cJSON_CreateString(r));
    cJSON_AddItemToArray(g.created, cJSON_CreateString(r));
    return save();
}

int os_runfiles_pending(const char *path) {
    if (!g.open) return 0;
    char buf[PATH_MAX];
    const char *r = rel(path, buf, sizeof buf);
    if (!r || !*r) return os_errf("%s: cannot record it in %s", path, g.mpath);
    drop(r);
    cJSON_AddItemToArray(arr("pending"), cJSON_CreateString(r));
    return save();
}

int os_runfiles_forget(const char *path) {
    if (!g.open) return 0;
    char buf[PATH_MAX];
    const char *r = rel(path, buf, sizeof buf);
    return r && drop(r) ? save() : 0;
}

static int prove_file(const char *r, const char *path, const struct stat *st, char *why, size_t n) {
    const cJSON *f = find("files", r);
    if (!f) return snprintf(why, n, "not listed in %s", OS_RUNFILES), 0;
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(f, "bytes"), *cs = cJSON_GetObjectItemCaseSensitive(f, "fnv1a64"),
                *mt = cJSON_GetObjectItemCaseSensitive(f, "mtime_ns");
    int append = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "append"));
    long long want = cJSON_IsNumber(by) ? (long long)by->valuedouble : -1, have = (long long)st->st_size;
    if (append ? have < want : have != want)
        return snprintf(why, n, "%lld bytes, %s%lld as omnishard wrote it", have, append ? "shorter than the " : "not ", want), 0;
    if (!cJSON_IsString(cs)) {   // a large file: its modification time
        char now[32];
        snprintf(now, sizeof now, "%lld", mtime_ns(st));
        if (!cJSON_IsString(mt) || strcmp(now, mt->valuestring)) return snprintf(why, n, "modified since omnishard wrote it"), 0;
        return 1;
    }
    uint64_t sum;
    char hex[32];
    if (prefix_sum(path, want, &sum) < 0) return snprintf(why, n, "%s", os_errmsg()), 0;
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)sum);
    if (strcmp(hex, cs->valuestring)) return snprintf(why, n, "its content differs from what omnishard wrote (checksum)"), 0;
    return 1;
}

static int prove(const char *r, char *why, size_t n) {
    char path[PATH_MAX + 512];
    full(r, path, sizeof path);
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 1 : (snprintf(why, n, "%s", strerror(errno)), 0);
    if (find("pending", r)) return 1;   // a temporary omnishard was about to write
    if (S_ISREG(st.st_mode)) return prove_file(r, path, &st, why, n);
    if (!S_ISDIR(st.st_mode) || !find("dirs", r)) return snprintf(why, n, "not listed in %s", OS_RUNFILES), 0;
    DIR *d = opendir(path);
    if (!d) return snprintf(why, n, "cannot list: %s", strerror(errno)), 0;
    int ok = 1;
    for (struct dirent *e; ok && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[PATH_MAX], inner[200];
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", r, e->d_name) >= sizeof sub) continue;
        if (!(ok = prove(sub, inner, sizeof inner))) snprintf(why, n, "holds %s: %s", sub + strlen(r) + 1, inner);
    }
    closedir(d);
    return ok;
}

int os_runfiles_proven(const char *path, char *why, size_t n) {
    if (!g.open) return snprintf(why, n, "no %s", OS_RUNFILES), 0;
    char buf[PATH_MAX];
    const char *r = rel(path, buf, sizeof buf);
    return r && *r ? prove(r, why, n) : (snprintf(why, n, "outside the directory"), 0);
}

const char *os_runfiles_external(int i) {
    if (!g.open) return NULL;
    cJSON *e;
    cJSON_ArrayForEach(e, arr("files")) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "path");
        if (cJSON_IsString(p) && p->valuestring[0] == '/' && i-- == 0) return p->valuestring;
    }
    return NULL;
}

int os_runfiles_remove(const char *path) {
    if (!g.open) return 0;
    char buf[PATH_MAX], why[512], p[PATH_MAX + 512];
    const char *r = rel(path, buf, sizeof buf);
    if (!r || !*r) return os_errf("%s: outside %s", path, g.dir);
    if (!prove(r, why, sizeof why)) return os_errf("%s: not removed: %s", path, why);
    full(r, p, sizeof p);
    if (os_rm_rf(p) < 0) return -1;
    drop(r);
    return save();
}

int os_runfiles_reset(void) {
    if (!g.open) return 0;
    empty_record();
    return save();
}

int os_runfiles_may_replace(const char *path) {
    char why[512];
    if (!g.open || os_runfiles_proven(path, why, sizeof why)) return 0;
    return os_errf("%s: exists and omnishard cannot prove it wrote it (%s); it is not replaced: move it away, or "
                   "give another --output_dir", path, why);
}

void os_runfiles_undo(void) {
    if (!g.open) return;
    g.open = 0;
    if (!cJSON_GetArraySize(g.created) && !g.created_manifest) return;   // nothing of this process to take back
    g.open = 1;
    char p[PATH_MAX + 512], why[512];
    for (int i = cJSON_GetArraySize(g.created) - 1; i >= 0; i--) {
        const char *r = cJSON_GetArrayItem(g.created, i)->valuestring;
        full(r, p, sizeof p);
        if (prove(r, why, sizeof why) && os_rm_rf(p) == 0) drop(r);
    }
    if (g.created_manifest && !cJSON_GetArraySize(arr("files")) && !cJSON_GetArraySize(arr("dirs")) &&
        !cJSON_GetArraySize(arr("pending")))
        unlink(g.mpath);
    else save();
    g.open = 0;
}
