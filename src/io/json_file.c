// JSON configuration files read strictly (io/json_file.h).
#include "io/json_file.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// at most max bytes of path (NUL-terminated; os_free it); NULL + message when it is longer, unreadable or a folder
static char *read_bounded(const char *path, size_t max, size_t *n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return os_errf("%s: cannot open: %s", path, strerror(errno)), NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        close(fd);
        return os_errf("%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory, expected a JSON file" : strerror(errno)), NULL;
    }
    if (S_ISREG(st.st_mode) && (size_t)st.st_size > max) {
        close(fd);
        return os_errf("%s: %lld bytes; a JSON configuration file is at most %zu bytes (is it the right file?)", path,
                       (long long)st.st_size, max), NULL;
    }
    char *buf = os_alloc_uninit(max + 2, path);
    size_t len = 0;
    int bad = 0;
    for (;;) {   // a pipe or device: read one byte past the bound to know it is too long
        ssize_t r = read(fd, buf + len, max + 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            bad = os_errf("%s: read failed: %s", path, strerror(errno));
            break;
        }
        if (r == 0) break;
        len += (size_t)r;
        if (len > max) {
            bad = os_errf("%s: more than %zu bytes; a JSON configuration file is at most that (is it the right file?)", path, max);
            break;
        }
    }
    close(fd);
    if (bad) {
        os_free(buf);
        return NULL;
    }
    buf[len] = 0;
    *n = len;
    return buf;
}

// "the top level" or "\"a\".\"b\"" of the object at path into buf
static void where(const char *parent, char *buf, size_t n) { snprintf(buf, n, "%s", *parent ? parent : "the top level"); }

// the first key given twice in an object of v (recursively); -1 + message naming it, both values and where
static int no_duplicates(const char *path, const cJSON *v, const char *at) {
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return 0;
    for (const cJSON *a = v->child; a; a = a->next) {
        for (const cJSON *b = a->next; cJSON_IsObject(v) && b; b = b->next) {
            if (strcmp(a->string, b->string)) continue;
            char *x = cJSON_PrintUnformatted(a), *y = cJSON_PrintUnformatted(b), w[512];
            where(at, w, sizeof w);
            os_errf("%s: key \"%s\" is given twice in %s: %.80s, then %.80s (JSON leaves duplicates undefined: "
                    "DeepSpeed would take the last, another reader the first); keep one", path, a->string, w,
                    x ? x : "?", y ? y : "?");
            cJSON_free(x), cJSON_free(y);
            return -1;
        }
        char sub[512];
        if (cJSON_IsObject(v)) snprintf(sub, sizeof sub, "%s%s\"%.100s\"", at, *at ? "." : "", a->string);
        else snprintf(sub, sizeof sub, "%s", at);
        if (no_duplicates(path, a, sub) < 0) return -1;
    }
    return 0;
}

cJSON *os_json_config_read(const char *path, size_t max_bytes, uint64_t *hash) {
    size_t n;
    char *text = read_bounded(path, max_bytes, &n);
    if (!text) return NULL;
    if (hash) *hash = os_fnv1a(OS_FNV_BASIS, text, n);
    const char *nul = memchr(text, 0, n), *end = NULL;
    cJSON *root = nul ? NULL : cJSON_ParseWithLengthOpts(text, n, &end, 0);
    size_t at = root ? (size_t)(end - text) : 0;
    while (root && at < n && strchr(" \t\r\n", text[at])) at++;
    int rc = 0;
    if (nul) rc = os_errf("%s: a NUL byte at byte %zu: not a JSON text file", path, (size_t)(nul - text));
    else if (!root) rc = os_errf("%s: not valid JSON (error near byte %zu)", path, end && end >= text ? (size_t)(end - text) : 0);
    else if (at < n) rc = os_errf("%s: content after the JSON value, at byte %zu ('%.20s'): one JSON object per file", path, at, text + at);
    else if (!cJSON_IsObject(root)) rc = os_errf("%s: expected a JSON object", path);
    else rc = no_duplicates(path, root, "");
    os_free(text);
    if (rc == 0) return root;
    cJSON_Delete(root);
    return NULL;
}
