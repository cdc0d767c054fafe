// Streaming safetensors writer (F32, or BF16 / F16 rounded from the floats put): header first (offsets known from
// the declared shapes), then the data as it is put; written to path.tmp.<pid> and renamed into place by finish, so path is never half-written.
#include "io/safetensors.h"
#include "io/atomic.h"
#include "core/alloc.h"
#include "core/err.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WBUF (4u << 20)

struct os_st_writer {
    char *path, *tmp;
    int fd, failed, dtype, esz;   // OS_DT_F32 / BF16 / F16, its bytes per element
    int64_t total, written;       // elements
    char *buf;
    size_t buflen;
    int nt;                       // the declared tensors (names in a float16 overflow's message)
    char **names;
    int64_t *ends;                // element offset where each ends
};

// growing text buffer for the header
typedef struct {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = os_alloc(cap, "safetensors header");
        if (b->s) memcpy(p, b->s, b->n);
        os_free(b->s);
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

// 1 when s is valid UTF-8 (JSON text must be)
static int utf8_ok(const unsigned char *s) {
    while (*s) {
        int k = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 ? 1 : (*s & 0xf0) == 0xe0 ? 2 : (*s & 0xf8) == 0xf0 ? 3 : -1;
        if (k < 0 || (k == 1 && *s < 0xc2)) return 0;
        for (int i = 1; i <= k; i++)
            if ((s[i] & 0xc0) != 0x80) return 0;
        s += k + 1;
    }
    return 1;
}

// JSON string literal of s: quotes, backslash and control characters escaped; UTF-8 passes through
static void sb_json(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            sb_put(b, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            sb_put(b, esc, 6);
        } else
            sb_put(b, (const char *)p, 1);
    }
    sb_put(b, "\"", 1);
}

static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

// build the header JSON into b; total floats into *total
static int build_header(sbuf *b, const char *path, int nt, const char *const *names, const int *ndims,
                        const int64_t (*shapes)[8], const char *const *meta_kv, int dtype, int64_t *total) {
    const int64_t esz = os_st_dtype_size(dtype);
    sb_str(b, "{");
    if (meta_kv && meta_kv[0]) {
        sb_str(b, "\"__metadata__\":{");
        for (int i = 0; meta_kv[i]; i += 2) {
            if (!meta_kv[i + 1]) return os_errf("%s: metadata key '%s': has no value", path, meta_kv[i]);
            if (!utf8_ok((const unsigned char *)meta_kv[i]) || !utf8_ok((const unsigned char *)meta_kv[i + 1]))
                return os_errf("%s: metadata key '%s': not valid UTF-8", path, meta_kv[i]);
            if (i) sb_str(b, ",");
            sb_json(b, meta_kv[i]);
            sb_str(b, ":");
            sb_json(b, meta_kv[i + 1]);
        }
        sb_str(b, "}");
    }
    int64_t off = 0;
    for (int i = 0; i < nt; i++) {
        const char *nm = names[i];
        if (!nm || !*nm) return os_errf("%s: tensor %d: empty name", path, i);
        if (!strcmp(nm, "__metadata__")) return os_errf("%s: tensor %d: the name '__metadata__' is reserved", path, i);
        if (!utf8_ok((const unsigned char *)nm)) return os_errf("%s: tensor %d: name is not valid UTF-8", path, i);
        if (ndims[i] < 0 || ndims[i] > OS_ST_MAX_NDIM)
            return os_errf("%s: tensor '%s': ndim: expected 0..%d, got %d", path, nm, OS_ST_MAX_NDIM, ndims[i]);
        int64_t numel = 1, bytes;
        char num[48];
        if (i || (meta_kv && meta_kv[0])) sb_str(b, ",");
        sb_json(b, nm);
        sb_str(b, ":{\"dtype\":\"");
        sb_str(b, os_st_dtype_name(dtype));
        sb_str(b, "\",\"shape\":[");
        for (int k = 0; k < ndims[i]; k++) {
            if (shapes[i][k] < 0)
                return os_errf("%s: tensor '%s': shape[%d]: expected a non-negative size, got %lld", path, nm, k,
                               (long long)shapes[i][k]);
            if (__builtin_mul_overflow(numel, shapes[i][k], &numel))
                return os_errf("%s: tensor '%s': shape: the element count overflows 64 bits", path, nm);
            snprintf(num, sizeof num, "%s%lld", k ? "," : "", (long long)shapes[i][k]);
            sb_str(b, num);
        }
        if (__builtin_mul_overflow(numel, esz, &bytes) || __builtin_add_overflow(off, bytes, &bytes))
            return os_errf("%s: tensor '%s': the data section size overflows 64 bits", path, nm);
        snprintf(num, sizeof num, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)bytes);
        sb_str(b, num);
        off = bytes;
    }
    sb_str(b, "}");
    while (b->n % 8) sb_str(b, " ");
    *total = off / esz;
    // duplicate names would make an invalid file
    const char **sorted = os_alloc(sizeof(char *) * (size_t)(nt + 1), "names");
    memcpy(sorted, names, sizeof(char *) * (size_t)nt);
    qsort(sorted, (size_t)nt, sizeof *sorted, cmp_str_ptr);
    int rc = 0;
    for (int i = 1; i < nt && rc == 0; i++)
        if (!strcmp(sorted[i], sorted[i - 1])) rc = os_errf("%s: tensor '%s': declared twice", path, sorted[i]);
    os_free(sorted);
    return rc;
}

static int write_all(os_st_writer *w, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        ssize_t r = write(w->fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            w->failed = 1;
            return os_errf("%s: write failed: %s", w->tmp, r < 0 ? strerror(errno) : "no progress");
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void free_writer(os_st_writer *w) {
    if (w->fd >= 0) close(w->fd);
    for (int i = 0; i < w->nt; i++) os_free(w->names[i]);
    os_free(w->names);
    os_free(w->ends);
    os_free(w->buf);
    os_free(w->tmp);
    os_free(w->path);
    os_free(w);
}

void os_st_writer_abort(os_st_writer *w) {
    if (!w) return;
    if (w->fd >= 0) unlink(w->tmp);
    free_writer(w);
}

os_st_writer *os_st_writer_begin(const char *path, int ntensors, const char *const *names, const int *ndims,
                                 const int64_t (*shapes)[8], const char *const *meta_kv) {
    return os_st_writer_begin_as(path, OS_DT_F32, ntensors, names, ndims, shapes, meta_kv);
}

os_st_writer *os_st_writer_begin_as(const char *path, int dtype, int ntensors, const char *const *names,
                                    const int *ndims, const int64_t (*shapes)[8], const char *const *meta_kv) {
    if (dtype != OS_DT_F32 && dtype != OS_DT_BF16 && dtype != OS_DT_F16) {
        os_errf("%s: writer: dtype %s: only F32, BF16 and F16 are written", path, os_st_dtype_name(dtype));
        return NULL;
    }
    if (ntensors < 0 || (ntensors > 0 && (!names || !ndims || !shapes))) {
        os_errf("%s: writer: %d tensors declared without names, ndims or shapes", path, ntensors);
        return NULL;
    }
    sbuf h = {0};
    int64_t total = 0;
    if (build_header(&h, path, ntensors, names, ndims, shapes, meta_kv, dtype, &total) != 0) {
        os_free(h.s);
        return NULL;
    }
    os_st_writer *w = os_alloc(sizeof *w, "safetensors writer");
    w->fd = -1;
    w->total = total;
    w->dtype = dtype, w->esz = os_st_dtype_size(dtype), w->nt = ntensors;
    w->names = os_alloc(sizeof(char *) * (size_t)(ntensors + 1), "writer names");
    w->ends = os_alloc(sizeof(int64_t) * (size_t)(ntensors + 1), "writer ends");
    for (int i = 0; i < ntensors; i++) {
        int64_t numel = 1;   // build_header has refused negative sizes and overflow
        for (int k = 0; k < ndims[i]; k++) numel *= shapes[i][k];
        w->ends[i] = (i ? w->ends[i - 1] : 0) + numel;
        w->names[i] = os_alloc(strlen(names[i]) + 1, "writer names");
        strcpy(w->names[i], names[i]);
    }
    w->path = os_alloc(strlen(path) + 1, "path");
    strcpy(w->path, path);
    w->tmp = os_alloc(strlen(path) + 32, "path");
    sprintf(w->tmp, "%s.tmp.%ld", path, (long)getpid());
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (w->fd < 0) {
        os_errf("%s: cannot create %s: %s", path, w->tmp, strerror(errno));
        free_writer(w);
        os_free(h.s);
        return NULL;
    }
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    int rc = write_all(w, len, 8);
    if (rc == 0) rc = write_all(w, h.s, h.n);
    os_free(h.s);
    if (rc != 0) {
        os_st_writer_abort(w);
        return NULL;
    }
    w->buf = os_alloc(WBUF, "safetensors write buffer");
    return w;
}

static int flush(os_st_writer *w) {
    int rc = write_all(w, w->buf, w->buflen);
    w->buflen = 0;
    return rc;
}

// bf16 and fp16 bits of x rounded to nearest even, as torch's .to(torch.bfloat16 / torch.float16)
static uint16_t to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40);   // NaN stays NaN (quiet)
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1)) >> 16);
}

static uint16_t to_f16(float x) {
    uint32_t u, a;
    memcpy(&u, &x, 4);
    uint16_t sign = (uint16_t)(u >> 16 & 0x8000);
    a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00;   // NaN
    if (a >= 0x477ff000u) return sign | 0x7c00;  // at or past 65520 (65504 + half its spacing): inf
    if (a < 0x38800000u) {                       // below 2^-14: a subnormal, |x| * 2^24 rounded (exact scaling)
        float f;
        memcpy(&f, &a, 4);
        return sign | (uint16_t)lrintf(f * 16777216.0f);
    }
    uint32_t r = a - 0x38000000u;   // exponent rebiased from 127 to 15
    return sign | (uint16_t)((r + 0xfffu + (r >> 13 & 1)) >> 13);
}

// n floats converted into dst (the writer's dtype); -1 + message naming the tensor when a finite value becomes
// float16's infinity
static int convert(os_st_writer *w, const float *src, int64_t n, char *dst) {
    if (w->dtype == OS_DT_F32) return memcpy(dst, src, (size_t)n * 4), 0;
    uint16_t *d = (uint16_t *)(void *)dst;
    for (int64_t i = 0; i < n; i++) {
        d[i] = w->dtype == OS_DT_BF16 ? to_bf16(src[i]) : to_f16(src[i]);
        if (w->dtype == OS_DT_F16 && (d[i] & 0x7fff) == 0x7c00 && isfinite(src[i])) {
            int64_t at = w->written + i;
            int t = 0;
            while (t + 1 < w->nt && w->ends[t] <= at) t++;
            w->failed = 1;
            return os_errf("%s: tensor '%s': the value %g is beyond float16's range (65504); save in bfloat16 or "
                           "float32", w->path, w->nt ? w->names[t] : "?", (double)src[i]);
        }
    }
    return 0;
}

int os_st_writer_put(os_st_writer *w, const float *data, int64_t n) {
    if (w->failed) return os_errf("%s: writer: put after an earlier error", w->path);
    if (n < 0 || (n > 0 && !data)) return os_errf("%s: writer: put of %lld floats without data", w->path, (long long)n);
    if (n > w->total - w->written) {
        w->failed = 1;
        return os_errf("%s: writer: put of %lld floats exceeds the declared total of %lld (%lld already written)",
                       w->path, (long long)n, (long long)w->total, (long long)w->written);
    }
    const float *p = data;
    int64_t left = n;
    while (left > 0) {   // WBUF is a multiple of every element size
        int64_t k = (int64_t)(WBUF - w->buflen) / w->esz < left ? (int64_t)(WBUF - w->buflen) / w->esz : left;
        if (convert(w, p, k, w->buf + w->buflen) < 0) return -1;
        w->buflen += (size_t)(k * w->esz);
        p += k;
        left -= k;
        w->written += k;
        if (w->buflen == WBUF && flush(w) != 0) return -1;
    }
    return 0;
}

int os_st_writer_finish(os_st_writer *w) {
    int rc = 0;
    if (w->failed) rc = os_errf("%s: writer: finish after an earlier error", w->path);
    else if (w->written != w->total)
        rc = os_errf("%s: writer: %lld floats were put, but the declared tensors hold %lld", w->path,
                     (long long)w->written, (long long)w->total);
    if (rc == 0) rc = flush(w);
    if (rc == 0 && fsync(w->fd) != 0) rc = os_errf("%s: fsync failed: %s", w->tmp, strerror(errno));
    if (rc == 0) {
        int fd = w->fd;
        w->fd = -1;
        if (close(fd) != 0) rc = os_errf("%s: close failed: %s", w->tmp, strerror(errno));
        else if (rename(w->tmp, w->path) != 0)
            rc = os_errf("%s: rename from %s failed: %s", w->path, w->tmp, strerror(errno));
        if (rc != 0) unlink(w->tmp);
        else rc = os_fsync_parent(w->path);
    }
    if (rc != 0 && w->fd >= 0) os_st_writer_abort(w);
    else free_writer(w);
    return rc;
}

int os_st_write_f32(const char *path, int ntensors, const char *const *names, const int *ndims,
                    const int64_t (*shapes)[8], const float *const *data, const char *const *meta_kv) {
    os_st_writer *w = os_st_writer_begin(path, ntensors, names, ndims, shapes, meta_kv);
    if (!w) return -1;
    for (int i = 0; i < ntensors; i++) {
        int64_t numel = 1;   // the header check in begin has refused negative sizes and overflow
        for (int k = 0; k < ndims[i]; k++) numel *= shapes[i][k];
        if (os_st_writer_put(w, data[i], numel) < 0) {
            os_st_writer_abort(w);
            return -1;
        }
    }
    return os_st_writer_finish(w);
}
