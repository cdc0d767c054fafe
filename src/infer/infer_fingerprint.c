// Content fingerprints of files and directories (infer_fingerprint.h).
#include "infer/infer_fingerprint.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { WHOLE = 8 << 20, END = 1 << 20, PIECES = 64, PIECE = 16 << 10, MAX_DEPTH = 8 };

// h over bytes [off, off + n) of fd; -1 + message
static int hash_range(int fd, const char *path, int64_t off, int64_t n, char *buf, uint64_t *h) {
    while (n > 0) {
        ssize_t k = pread(fd, buf, (size_t)(n < END ? n : END), (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return os_errf("%s: read failed: %s", path, k < 0 ? strerror(errno) : "the file shrank");
        *h = os_fnv1a(*h, buf, (size_t)k), off += k, n -= k;
    }
    return 0;
}

static int hash_file(const char *path, int64_t size, uint64_t *h) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return os_errf("%s: cannot open: %s", path, strerror(errno));
    char *buf = os_alloc_uninit(END, "fingerprint buffer");
    *h = os_fnv1a(*h, &size, sizeof size);
    int rc = 0;
    if (size <= WHOLE) rc = hash_range(fd, path, 0, size, buf, h);
    else {
        rc = hash_range(fd, path, 0, END, buf, h);
        for (int64_t k = 0; rc == 0 && k < PIECES; k++)
            rc = hash_range(fd, path, END + (size - 2 * END - PIECE) / (PIECES - 1) * k, PIECE, buf, h);
        if (rc == 0) rc = hash_range(fd, path, size - END, END, buf, h);
    }
    os_free(buf);
    close(fd);
    return rc;
}

// a file that lies in a model directory without being part of the model
static int not_model(const char *name) {
    static const char *const END[] = {".jsonl", ".log", ".md", ".png", ".svg", ".wav", ".run.json"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof END / sizeof END[0]; i++)
        if (n >= strlen(END[i]) && !strcmp(name + n - strlen(END[i]), END[i])) return 1;
    return 0;
}

static int by_name(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

// path (rel: its name under the fingerprinted root) into h
static int walk(const char *path, const char *rel, int depth, int model, uint64_t *h) {
    struct stat st;
    if (stat(path, &st) < 0) return os_errf("%s: %s", path, strerror(errno));
    *h = os_fnv1a(*h, rel, strlen(rel) + 1);
    if (S_ISREG(st.st_mode)) return hash_file(path, (int64_t)st.st_size, h);
    if (!S_ISDIR(st.st_mode) || depth > MAX_DEPTH) return 0;
    DIR *d = opendir(path);
    if (!d) return os_errf("%s: cannot list: %s", path, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || (model && not_model(e->d_name))) continue;
        if (n == cap) names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
        if (!names) os_die("out of memory listing %s", path);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char sub[4400], subrel[4400];
        snprintf(sub, sizeof sub, "%s/%s", path, names[i]);
        snprintf(subrel, sizeof subrel, "%s/%s", rel, names[i]);
        if (rc == 0) rc = walk(sub, subrel, depth + 1, model, h);
        free(names[i]);
    }
    free(names);
    return rc;
}

int os_fingerprint(const char *path, int model, uint64_t *h) {
    *h = OS_FNV_BASIS;
    return walk(path, ".", 0, model, h);
}
