// Atomic file writing (temp + fsync + rename + directory fsync) and directory helpers.
#include "io/atomic.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = os_alloc(n, "path");
    memcpy(p, s, n);
    return p;
}

int os_fsync_parent(const char *path) {
    char *dir = dup_str(path);
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;
    if (fd < 0) rc = os_errf("%s: cannot open directory to fsync: %s", dir, strerror(errno));
    else {
        // some file systems cannot fsync a directory (EINVAL): nothing more can be done there
        if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
            rc = os_errf("%s: fsync of directory failed: %s", dir, strerror(errno));
        close(fd);
    }
    os_free(dir);
    return rc;
}

int os_write_file_atomic(const char *path, const void *data, size_t n) {
    size_t tmp_size = strlen(path) + 32;   // ".tmp." and a pid fit in 32
    char *tmp = os_alloc(tmp_size, "temp path");
    snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        os_errf("%s: cannot create %s: %s", path, tmp, strerror(errno));
        os_free(tmp);
        return -1;
    }
    const char *p = data;
    size_t left = n;
    int rc = 0;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            rc = os_errf("%s: write failed: %s", path, w < 0 ? strerror(errno) : "no progress");
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    if (rc == 0 && fsync(fd) != 0) rc = os_errf("%s: fsync failed: %s", path, strerror(errno));
    if (close(fd) != 0 && rc == 0) rc = os_errf("%s: close failed: %s", path, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0) rc = os_errf("%s: rename from %s failed: %s", path, tmp, strerror(errno));
    if (rc != 0) unlink(tmp);
    else rc = os_fsync_parent(path);
    os_free(tmp);
    return rc;
}

int os_mkdir_p(const char *path) {
    if (!path || !*path) return os_errf("mkdir: empty path");
    char *p = dup_str(path);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            rc = os_errf("%s: cannot create directory %s: %s", path, p, strerror(errno));
            break;
        }
        struct stat st;
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
            rc = os_errf("%s: %s exists and is not a directory", path, p);
            break;
        }
        *s = c;
        if (c == 0) break;
    }
    os_free(p);
    return rc;
}

// 0 when fd may be read as a file; -1 + message naming path (a directory, or fstat failing)
static int check_file(int fd, const char *path, const char *what, struct stat *st) {
    if (fstat(fd, st) != 0) return os_errf("%s: cannot read: %s", path, strerror(errno));
    if (S_ISDIR(st->st_mode)) return os_errf("%s: is a directory, expected %s", path, what);
    return 0;
}

FILE *os_fopen_read(const char *path, const char *what) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        os_errf("%s: cannot open %s: %s", path, what, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (check_file(fileno(f), path, what, &st)) {
        fclose(f);
        return NULL;
    }
    return f;
}

char *os_read_file(const char *path, size_t *n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        os_errf("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (check_file(fd, path, "a file", &st)) {
        close(fd);
        return NULL;
    }
    // st_size is a hint only (pipes, /proc report 0): grow as needed
    size_t cap = (st.st_size > 0 ? (size_t)st.st_size : 4096) + 1, len = 0;
    char *buf = os_alloc_uninit(cap, path);   // read() writes [0, len), the terminator follows
    for (;;) {
        if (len + 1 == cap) {   // full: grow only if the file goes on (a 1-byte probe), not to find the end
            char c;
            ssize_t r = read(fd, &c, 1);
            if (r < 0 && errno == EINTR) continue;
            if (r == 0) break;
            if (r < 0) {
                os_errf("%s: read failed: %s", path, strerror(errno));
                os_free(buf);
                close(fd);
                return NULL;
            }
            char *nb = os_alloc_uninit(cap * 2, path);
            memcpy(nb, buf, len);
            os_free(buf);
            buf = nb;
            cap *= 2;
            buf[len++] = c;
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            os_errf("%s: read failed: %s", path, strerror(errno));
            os_free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = 0;
    if (n) *n = len;
    return buf;
}

// remove the entry `name` inside the directory parent (recursively when it is a directory)
static int rm_at(int parent, const char *name, const char *shown) {
    struct stat st;
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return 0;
        return os_errf("%s: cannot stat: %s", shown, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(parent, name, 0) != 0 && errno != ENOENT) return os_errf("%s: cannot remove: %s", shown, strerror(errno));
        return 0;
    }
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return os_errf("%s: cannot open directory: %s", shown, strerror(errno));
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return os_errf("%s: cannot list directory: %s", shown, strerror(errno));
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        rc = rm_at(dirfd(d), e->d_name, shown);
    }
    closedir(d);
    if (rc == 0 && unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
        rc = os_errf("%s: cannot remove directory: %s", shown, strerror(errno));
    return rc;
}

int os_rm_rf(const char *path) {
    if (!path || !*path) return os_errf("rm: empty path");
    return rm_at(AT_FDCWD, path, path);
}

int os_rename_dir_atomic(const char *tmpdir, const char *finaldir) {
    struct stat st;
    if (stat(tmpdir, &st) != 0 || !S_ISDIR(st.st_mode))
        return os_errf("%s: not a directory (to be renamed to %s)", tmpdir, finaldir);
    if (lstat(finaldir, &st) != 0) {
        if (errno != ENOENT) return os_errf("%s: cannot stat: %s", finaldir, strerror(errno));
        if (rename(tmpdir, finaldir) != 0)
            return os_errf("%s: rename from %s failed: %s", finaldir, tmpdir, strerror(errno));
        return os_fsync_parent(finaldir);
    }
    if (!S_ISDIR(st.st_mode)) return os_errf("%s: exists and is not a directory", finaldir);
    // Linux: swap the two names in one step, so finaldir always exists; otherwise rename the old one away.
    if (renameat2(AT_FDCWD, tmpdir, AT_FDCWD, finaldir, RENAME_EXCHANGE) == 0) {
        if (os_fsync_parent(finaldir) != 0) return -1;
        return os_rm_rf(tmpdir);   // now holds the old contents
    }
    char *old = os_alloc(strlen(finaldir) + 32, "path");
    sprintf(old, "%s.old.%ld", finaldir, (long)getpid());
    int rc = os_rm_rf(old);
    if (rc != 0) {
    } else if (rename(finaldir, old) != 0)
        rc = os_errf("%s: cannot move the old directory to %s: %s", finaldir, old, strerror(errno));
    else if (rename(tmpdir, finaldir) != 0) {
        rc = os_errf("%s: rename from %s failed: %s", finaldir, tmpdir, strerror(errno));
        rename(old, finaldir);   // put the old one back
    } else if ((rc = os_fsync_parent(finaldir)) == 0)
        rc = os_rm_rf(old);
    os_free(old);
    return rc;
}

int os_file_checksum(const char *path, int64_t *bytes, uint64_t *sum) {
    enum { PIECE = 4 << 20 };
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return os_errf("%s: cannot open: %s", path, strerror(errno));
    char *buf = os_alloc_uninit(PIECE, "checksum buffer");   // read() writes what is hashed
    uint64_t h = OS_FNV_BASIS;
    int64_t n = 0;
    int rc = 0;
    for (;;) {
        ssize_t r = read(fd, buf, PIECE);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) rc = os_errf("%s: read failed: %s", path, strerror(errno));
        if (r <= 0) break;
        h = os_fnv1a(h, buf, (size_t)r), n += r;
    }
    os_free(buf);
    close(fd);
    *bytes = n, *sum = h;
    return rc;
}

int os_path_absolute(const char *path, const char *base, char *out, size_t n) {
    char cwd[4096] = "";
    if (path[0] != '/' && (!base || base[0] != '/') && !getcwd(cwd, sizeof cwd))
        return os_errf("%s: cannot make an absolute path: the current directory is unknown: %s", path, strerror(errno));
    size_t k;
    if (path[0] == '/') k = (size_t)snprintf(out, n, "%s", path);
    else if (!base) k = (size_t)snprintf(out, n, "%s/%s", cwd, path);
    else k = (size_t)snprintf(out, n, "%s%s%s/%s", base[0] == '/' ? "" : cwd, base[0] == '/' ? "" : "/", base, path);
    if (k >= n) return os_errf("%s: the absolute path is longer than %zu bytes", path, n - 1);
    return 0;
}
