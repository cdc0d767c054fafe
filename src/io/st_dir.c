// Model directories: DIR/model.safetensors, or DIR/model.safetensors.index.json naming shards, plus extra
// safetensors files added explicitly. One name -> tensor map over all of them (a name may occur only once).
#include "io/safetensors.h"
#include "io/atomic.h"
#include "core/alloc.h"
#include "core/err.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const os_st_tensor *t;
    int file;
} entry;

struct os_st_dir {
    int nfiles, capfiles;
    os_st_file **files;
    int n, cap;
    const os_st_tensor **order;   // files in open order, tensors in file order
    entry *sorted;                // by name
};

static int cmp_entry(const void *a, const void *b) { return strcmp(((const entry *)a)->t->name, ((const entry *)b)->t->name); }
static int cmp_key_entry(const void *key, const void *e) { return strcmp((const char *)key, ((const entry *)e)->t->name); }

static const entry *lookup(const os_st_dir *d, const char *name) {
    return d->n ? bsearch(name, d->sorted, (size_t)d->n, sizeof *d->sorted, cmp_key_entry) : NULL;
}

const os_st_tensor *os_st_dir_find(const os_st_dir *d, const char *name) {
    const entry *e = d && name ? lookup(d, name) : NULL;
    return e ? e->t : NULL;
}
int os_st_dir_count(const os_st_dir *d) { return d->n; }
const os_st_tensor *os_st_dir_at(const os_st_dir *d, int i) { return i >= 0 && i < d->n ? d->order[i] : NULL; }

void os_st_dir_release_pages(os_st_dir *d) {
    for (int i = 0; d && i < d->nfiles; i++) os_st_release_pages(d->files[i]);
}

void os_st_dir_close(os_st_dir *d) {
    if (!d) return;
    for (int i = 0; i < d->nfiles; i++) os_st_close(d->files[i]);
    os_free(d->files);
    os_free(d->order);
    os_free(d->sorted);
    os_free(d);
}

static void *grow(void *old, size_t elem, int n, int newcap, const char *what) {
    void *p = os_alloc(elem * (size_t)newcap, what);
    if (old) memcpy(p, old, elem * (size_t)n);
    os_free(old);
    return p;
}

// take ownership of an opened file f (closed on error)
static int add_opened(os_st_dir *d, os_st_file *f) {
    int m = os_st_count(f);
    for (int i = 0; i < m; i++) {
        const entry *e = lookup(d, os_st_at(f, i)->name);
        if (e) {
            os_errf("%s: tensor '%s': already defined by %s", os_st_path(f), e->t->name, os_st_path(d->files[e->file]));
            os_st_close(f);
            return -1;
        }
    }
    if (d->nfiles == d->capfiles) {
        d->capfiles = d->capfiles ? 2 * d->capfiles : 4;
        d->files = grow(d->files, sizeof *d->files, d->nfiles, d->capfiles, "safetensors files");
    }
    if (d->n + m > d->cap) {
        int cap = d->cap ? 2 * d->cap : 256;
        while (cap < d->n + m) cap *= 2;
        d->order = grow(d->order, sizeof *d->order, d->n, cap, "safetensors tensors");
        d->sorted = grow(d->sorted, sizeof *d->sorted, d->n, cap, "safetensors index");
        d->cap = cap;
    }
    int fi = d->nfiles++;
    d->files[fi] = f;
    for (int i = 0; i < m; i++) {
        d->order[d->n + i] = os_st_at(f, i);
        d->sorted[d->n + i] = (entry){os_st_at(f, i), fi};
    }
    d->n += m;
    qsort(d->sorted, (size_t)d->n, sizeof *d->sorted, cmp_entry);
    return 0;
}

int os_st_dir_add_file(os_st_dir *d, const char *path) {
    os_st_file *f = os_st_open(path);
    return f ? add_opened(d, f) : -1;
}

static char *join(const char *dir, const char *name) {
    char *p = os_alloc(strlen(dir) + strlen(name) + 2, "path");
    sprintf(p, "%s/%s", dir, name);
    return p;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// a shard name must stay inside the directory: relative, no ".." component
static int safe_name(const char *s) {
    if (!*s || *s == '/') return 0;
    for (const char *p = s; *p;) {
        const char *q = strchr(p, '/');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') return 0;
        p += n + (q ? 1 : 0);
    }
    return 1;
}

static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int open_index(os_st_dir *d, const char *dir, const char *index) {
    char *text = os_read_file(index, NULL);
    if (!text) return -1;
    cJSON *root = cJSON_Parse(text);
    os_free(text);
    if (!root) return os_errf("%s: not valid JSON", index);
    int rc = 0, nshard = 0;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    const char **shards = NULL;
    if (!cJSON_IsObject(wm) || !wm->child) {
        rc = os_errf("%s: weight_map: expected a non-empty object of tensor name -> file name", index);
        goto done;
    }
    shards = os_alloc(sizeof(char *) * (size_t)cJSON_GetArraySize(wm), "shard names");
    for (const cJSON *e = wm->child; e && rc == 0; e = e->next) {
        if (!cJSON_IsString(e) || !safe_name(e->valuestring)) {
            rc = os_errf("%s: weight_map: '%s': expected a file name inside %s", index, e->string, dir);
            break;
        }
        int k = 0;
        while (k < nshard && strcmp(shards[k], e->valuestring)) k++;
        if (k == nshard) shards[nshard++] = e->valuestring;
    }
    qsort(shards, (size_t)nshard, sizeof *shards, cmp_str_ptr);   // open (and list) shards in file-name order
    for (int k = 0; k < nshard && rc == 0; k++) {
        char *p = join(dir, shards[k]);
        os_st_file *f = os_st_open(p);
        os_free(p);
        if (!f) rc = os_err_ctx("%s: weight_map: shard '%s'", index, shards[k]);
        else rc = add_opened(d, f);
    }
    for (const cJSON *e = wm->child; e && rc == 0; e = e->next) {
        const entry *t = lookup(d, e->string);
        if (!t) {
            char *p = join(dir, e->valuestring);
            rc = os_errf("%s: weight_map: tensor '%s' is not in %s", index, e->string, p);
            os_free(p);
        } else if (strcmp(os_st_path(d->files[t->file]) + strlen(dir) + 1, e->valuestring)) {
            rc = os_errf("%s: weight_map: tensor '%s' is listed in %s but found in %s", index, e->string, e->valuestring,
                         os_st_path(d->files[t->file]));
        }
    }
done:
    os_free(shards);
    cJSON_Delete(root);
    return rc;
}

os_st_dir *os_st_dir_open(const char *dir) {
    os_st_dir *d = os_alloc(sizeof *d, "safetensors directory");
    char *index = join(dir, "model.safetensors.index.json"), *single = join(dir, "model.safetensors");
    int rc;
    if (exists(index)) rc = open_index(d, dir, index);
    else if (exists(single)) rc = os_st_dir_add_file(d, single);
    else {
        struct stat st;
        rc = stat(dir, &st) != 0 ? os_errf("%s: cannot open model directory: %s", dir, strerror(errno))
                                  : os_errf("%s: neither model.safetensors nor model.safetensors.index.json exists",
                                            dir);
    }
    os_free(index);
    os_free(single);
    if (rc != 0) {
        os_st_dir_close(d);
        return NULL;
    }
    return d;
}
