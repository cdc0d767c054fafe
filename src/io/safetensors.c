// safetensors reader: mmap the file read-only, validate the whole JSON header, index tensors by name.
// Rules enforced are listed in docs/model-directory.md.
#include "io/safetensors.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/json_kind.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader assumes a little-endian host"
#endif

#define MAX_HEADER 100000000LL   // 100 MB, as the reference implementation

static const char *const dt_names[OS_DT_COUNT] = {"F32", "F16", "BF16", "F64", "I32", "I64", "I8", "U8", "BOOL"};
static const int dt_sizes[OS_DT_COUNT] = {4, 2, 2, 8, 4, 8, 1, 1, 1};

const char *os_st_dtype_name(int dtype) { return dtype >= 0 && dtype < OS_DT_COUNT ? dt_names[dtype] : "?"; }
int os_st_dtype_size(int dtype) { return dtype >= 0 && dtype < OS_DT_COUNT ? dt_sizes[dtype] : 0; }

struct os_st_file {
    char *path;
    void *map;
    size_t map_len;
    int n;
    os_st_tensor *t;                // in data-offset order
    const os_st_tensor **by_name;   // sorted by name
    int nmeta;
    const char **meta_kv;   // key0, value0, key1, ...
    char *strings;          // arena holding path-independent names, metadata keys and values
};

const char *os_st_path(const os_st_file *f) { return f->path; }
int os_st_count(const os_st_file *f) { return f->n; }
const os_st_tensor *os_st_at(const os_st_file *f, int i) { return i >= 0 && i < f->n ? &f->t[i] : NULL; }

static int cmp_tensor_ptr_name(const void *a, const void *b) {
    return strcmp((*(const os_st_tensor *const *)a)->name, (*(const os_st_tensor *const *)b)->name);
}
static int cmp_key_name(const void *key, const void *elem) {
    return strcmp((const char *)key, (*(const os_st_tensor *const *)elem)->name);
}

const os_st_tensor *os_st_find(const os_st_file *f, const char *name) {
    if (!f || !name || f->n == 0) return NULL;
    const os_st_tensor *const *p = bsearch(name, f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_key_name);
    return p ? *p : NULL;
}

const char *os_st_metadata(const os_st_file *f, const char *key) {
    for (int i = 0; f && key && i < f->nmeta; i++)
        if (!strcmp(f->meta_kv[2 * i], key)) return f->meta_kv[2 * i + 1];
    return NULL;
}

void os_st_release_pages(os_st_file *f) {
    if (f && f->map) madvise(f->map, f->map_len, MADV_DONTNEED);
}

void os_st_close(os_st_file *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->map_len);
    os_free(f->t);
    os_free(f->by_name);
    os_free(f->meta_kv);
    os_free(f->strings);
    os_free(f->path);
    os_free(f);
}

// ---- header validation ----

// the JSON text of v for messages (truncated), into buf
static const char *json_shown(const cJSON *v, char *buf, size_t n) {
    char *s = v ? cJSON_PrintUnformatted(v) : NULL;
    snprintf(buf, n, "%s", s ? s : "nothing (the field is missing)");
    if (s) cJSON_free(s);
    return buf;
}

static char *arena_put(char **cur, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = *cur;
    memcpy(p, s, n);
    *cur += n;
    return p;
}

// parse one tensor entry into t (name already set); data_len = size of the data section
static int parse_tensor(const char *path, const cJSON *e, os_st_tensor *t, int64_t *begin, int64_t *end,
                        int64_t data_len) {
    char got[96];
    const char *nm = t->name;
    if (!cJSON_IsObject(e))
        return os_errf("%s: tensor '%s': expected an object with dtype, shape, data_offsets, got %s", path, nm,
                       json_shown(e, got, sizeof got));
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt))
        return os_errf("%s: tensor '%s': dtype: expected a string, got %s", path, nm, json_shown(dt, got, sizeof got));
    t->dtype = -1;
    for (int i = 0; i < OS_DT_COUNT; i++)
        if (!strcmp(dt->valuestring, dt_names[i])) t->dtype = i;
    if (t->dtype < 0)
        return os_errf("%s: tensor '%s': dtype: \"%.40s\" is not supported (expected one of F32, F16, BF16, F64, I32, "
                       "I64, I8, U8, BOOL)", path, nm, dt->valuestring);
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsArray(sh))
        return os_errf("%s: tensor '%s': shape: expected an array of sizes, got %s", path, nm,
                       json_shown(sh, got, sizeof got));
    int nd = cJSON_GetArraySize(sh);
    if (nd > OS_ST_MAX_NDIM)
        return os_errf("%s: tensor '%s': shape: %d dimensions (expected at most %d)", path, nm, nd, OS_ST_MAX_NDIM);
    t->ndim = nd;
    t->numel = 1;
    int k = 0;
    for (const cJSON *d = sh->child; d; d = d->next, k++) {
        int64_t v;
        if (!os_json_int(d, 0, INT64_MAX, &v))
            return os_errf("%s: tensor '%s': shape[%d]: expected a non-negative integer, got %s", path, nm, k,
                           json_shown(d, got, sizeof got));
        t->shape[k] = v;
        if (__builtin_mul_overflow(t->numel, v, &t->numel))
            return os_errf("%s: tensor '%s': shape: the element count overflows 64 bits", path, nm);
    }
    int64_t nbytes;
    if (__builtin_mul_overflow(t->numel, (int64_t)dt_sizes[t->dtype], &nbytes))
        return os_errf("%s: tensor '%s': shape: the byte count overflows 64 bits", path, nm);
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !os_json_int(off->child, 0, INT64_MAX, begin) ||
        !os_json_int(off->child->next, 0, INT64_MAX, end))
        return os_errf("%s: tensor '%s': data_offsets: expected [begin, end] with non-negative integers, got %s", path,
                       nm, json_shown(off, got, sizeof got));
    if (*begin > *end)
        return os_errf("%s: tensor '%s': data_offsets [%lld, %lld]: begin is after end", path, nm, (long long)*begin,
                       (long long)*end);
    if (*end > data_len)
        return os_errf("%s: tensor '%s': data_offsets [%lld, %lld] exceed the data section of %lld bytes", path, nm,
                       (long long)*begin, (long long)*end, (long long)data_len);
    if (*end - *begin != nbytes)
        return os_errf("%s: tensor '%s': data_offsets [%lld, %lld] hold %lld bytes, but dtype %s and shape of %lld "
                       "elements need %lld bytes", path, nm, (long long)*begin, (long long)*end,
                       (long long)(*end - *begin), dt_names[t->dtype], (long long)t->numel, (long long)nbytes);
    return 0;
}

typedef struct {
    int64_t begin, end;
    int idx;
} span;
static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->idx - y->idx;
}

// Fill f from the parsed header. data = start of the data section, data_len its size.
static int load_header(os_st_file *f, const cJSON *root, const char *data, int64_t data_len) {
    const char *path = f->path;
    if (!cJSON_IsObject(root)) return os_errf("%s: header: expected a JSON object", path);
    size_t strbytes = 0;
    int n = 0, nmeta = 0;
    const cJSON *meta = NULL;
    for (const cJSON *e = root->child; e; e = e->next) {
        strbytes += strlen(e->string) + 1;
        if (strcmp(e->string, "__metadata__") != 0) {
            n++;
            continue;
        }
        if (meta) return os_errf("%s: __metadata__: appears twice in the header", path);
        meta = e;
        if (cJSON_IsNull(e)) continue;
        if (!cJSON_IsObject(e)) return os_errf("%s: __metadata__: expected an object of strings", path);
        for (const cJSON *m = e->child; m; m = m->next, nmeta++) {
            if (!cJSON_IsString(m)) {
                char got[96];
                return os_errf("%s: __metadata__: '%s': expected a string value, got %s", path, m->string,
                               json_shown(m, got, sizeof got));
            }
            strbytes += strlen(m->string) + strlen(m->valuestring) + 2;
        }
    }
    f->strings = os_alloc(strbytes + 1, "safetensors names");
    f->t = os_alloc(sizeof(os_st_tensor) * (size_t)(n + 1), "safetensors tensors");
    f->by_name = os_alloc(sizeof(*f->by_name) * (size_t)(n + 1), "safetensors index");
    f->meta_kv = os_alloc(sizeof(char *) * (size_t)(2 * nmeta + 1), "safetensors metadata");
    span *sp = os_alloc(sizeof(span) * (size_t)(n + 1), "safetensors spans");
    os_st_tensor *raw = os_alloc(sizeof(os_st_tensor) * (size_t)(n + 1), "safetensors tensors");
    char *cur = f->strings;
    int i = 0, rc = 0;
    if (meta && cJSON_IsObject(meta))
        for (const cJSON *m = meta->child; m; m = m->next, f->nmeta++) {
            f->meta_kv[2 * f->nmeta] = arena_put(&cur, m->string);
            f->meta_kv[2 * f->nmeta + 1] = arena_put(&cur, m->valuestring);
        }
    for (const cJSON *e = root->child; e && rc == 0; e = e->next) {
        if (e == meta) continue;
        raw[i].name = arena_put(&cur, e->string);
        rc = parse_tensor(path, e, &raw[i], &sp[i].begin, &sp[i].end, data_len);
        sp[i].idx = i;
        i++;
    }
    if (rc == 0) {
        // data-offset order; overlapping (non-empty) byte ranges are an error
        qsort(sp, (size_t)n, sizeof *sp, cmp_span);
        int prev = -1;
        for (int j = 0; j < n && rc == 0; j++) {
            if (sp[j].begin == sp[j].end) continue;
            if (prev >= 0 && sp[j].begin < sp[prev].end)
                rc = os_errf("%s: tensor '%s': data_offsets [%lld, %lld] overlap those of tensor '%s' [%lld, %lld]",
                             path, raw[sp[j].idx].name, (long long)sp[j].begin, (long long)sp[j].end,
                             raw[sp[prev].idx].name, (long long)sp[prev].begin, (long long)sp[prev].end);
            prev = j;
        }
    }
    if (rc == 0) {
        for (int j = 0; j < n; j++) {
            f->t[j] = raw[sp[j].idx];
            f->t[j].data = data + sp[j].begin;
            f->by_name[j] = &f->t[j];
        }
        f->n = n;
        qsort(f->by_name, (size_t)n, sizeof *f->by_name, cmp_tensor_ptr_name);
        for (int j = 1; j < n && rc == 0; j++)
            if (!strcmp(f->by_name[j]->name, f->by_name[j - 1]->name))
                rc = os_errf("%s: tensor '%s': appears twice in the header", path, f->by_name[j]->name);
    }
    os_free(sp);
    os_free(raw);
    return rc;
}

os_st_file *os_st_open(const char *path) {
    os_st_file *f = os_alloc(sizeof *f, "safetensors file");
    f->path = os_alloc(strlen(path) + 1, "path");
    strcpy(f->path, path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        os_errf("%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        os_errf("%s: not a regular file", path);
        goto fail;
    }
    int64_t size = st.st_size;
    if (size < 8) {
        os_errf("%s: file is %lld bytes, too short for the 8-byte header length", path, (long long)size);
        goto fail;
    }
    f->map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        os_errf("%s: mmap of %lld bytes failed: %s", path, (long long)size, strerror(errno));
        goto fail;
    }
    f->map_len = (size_t)size;
    close(fd);
    fd = -1;
    const unsigned char *b = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b[i];
    if (hlen > (uint64_t)MAX_HEADER) {
        os_errf("%s: header length %llu exceeds the limit of %lld bytes", path, (unsigned long long)hlen, MAX_HEADER);
        goto fail;
    }
    if ((int64_t)hlen > size - 8) {
        os_errf("%s: header length %llu exceeds the file (%lld bytes after the 8-byte length)", path,
                (unsigned long long)hlen, (long long)(size - 8));
        goto fail;
    }
    const char *h = (const char *)b + 8, *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(h, (size_t)hlen, &end, 0);
    if (!root) {
        size_t at = end && end >= h && end <= h + hlen ? (size_t)(end - h) : 0;
        os_errf("%s: header: not valid JSON (error near byte %zu of %llu)", path, at, (unsigned long long)hlen);
        goto fail;
    }
    for (const char *p = end; p < h + hlen; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') {
            os_errf("%s: header: unexpected bytes after the JSON object (at byte %zu of %llu)", path, (size_t)(p - h),
                    (unsigned long long)hlen);
            cJSON_Delete(root);
            goto fail;
        }
    int rc = load_header(f, root, h + hlen, size - 8 - (int64_t)hlen);
    cJSON_Delete(root);
    if (rc != 0) goto fail;
    return f;
fail:
    if (fd >= 0) close(fd);
    os_st_close(f);
    return NULL;
}

// ---- element conversion ----

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    float f;
    if (exp == 0) {   // zero or subnormal: man * 2^-24
        f = (float)man * 0x1p-24f;
        memcpy(&bits, &f, 4);
        bits |= sign;
    } else if (exp == 31) {   // inf / nan (payload kept)
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 112) << 23 | man << 13;   // rebias 15 -> 127
    }
    memcpy(&f, &bits, 4);
    return f;
}

static int check_range(const os_st_tensor *t, int64_t start, int64_t n, const char *what) {
    if (start < 0 || n < 0 || start > t->numel || n > t->numel - start)
        return os_errf("tensor '%s': %s of %lld elements from index %lld is outside its %lld elements", t->name, what,
                       (long long)n, (long long)start, (long long)t->numel);
    return 0;
}

int os_st_read_f32(const os_st_tensor *t, int64_t start, int64_t n, float *dst) {
    if (check_range(t, start, n, "read") != 0) return -1;
    const unsigned char *s = (const unsigned char *)t->data + start * dt_sizes[t->dtype];
    switch (t->dtype) {
    case OS_DT_F32: memcpy(dst, s, (size_t)n * 4); return 0;
    case OS_DT_F64:
        for (int64_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, s + 8 * i, 8);
            dst[i] = (float)d;
        }
        return 0;
    case OS_DT_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = f16_to_f32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
        return 0;
    case OS_DT_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)(s[2 * i] | s[2 * i + 1] << 8) << 16;
            memcpy(&dst[i], &bits, 4);
        }
        return 0;
    default:
        return os_errf("tensor '%s': dtype %s cannot be read as float (expected F32, F16, BF16 or F64)", t->name,
                       os_st_dtype_name(t->dtype));
    }
}

int os_st_read_i64(const os_st_tensor *t, int64_t start, int64_t n, int64_t *dst) {
    if (t->dtype != OS_DT_I64 && t->dtype != OS_DT_I32 && t->dtype != OS_DT_I8 && t->dtype != OS_DT_U8 &&
        t->dtype != OS_DT_BOOL)
        return os_errf("tensor '%s': dtype %s cannot be read as integer (expected I64, I32, I8, U8 or BOOL)", t->name,
                       os_st_dtype_name(t->dtype));
    if (check_range(t, start, n, "read") != 0) return -1;
    const unsigned char *s = (const unsigned char *)t->data + start * dt_sizes[t->dtype];
    for (int64_t i = 0; i < n; i++) switch (t->dtype) {
        case OS_DT_I64: memcpy(&dst[i], s + 8 * i, 8); break;
        case OS_DT_I32: {
            int32_t v;
            memcpy(&v, s + 4 * i, 4);
            dst[i] = v;
            break;
        }
        case OS_DT_I8: dst[i] = (int8_t)s[i]; break;
        default: dst[i] = s[i]; break;   // U8, BOOL
        }
    return 0;
}
