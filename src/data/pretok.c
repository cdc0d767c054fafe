#include "core/alloc.h"
#include "core/err.h"
#include "data/dataset.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    os_dataset base;
    int64_t R;
    int64_t *L;
    int32_t **ids, **labels;   // per sample [R, L]
} pretok_ds;

static int read_rows(const cJSON *arr, const char *path, int64_t line, const char *field, int64_t R, int64_t *L,
                     int32_t **out) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != R)
        return os_errf("%s:%lld: field '%s': expected an array of %lld rows (G+1)", path, (long long)line, field, (long long)R);
    int64_t len = -1;
    int32_t *buf = NULL;
    for (int64_t r = 0; r < R; r++) {
        const cJSON *row = cJSON_GetArrayItem(arr, (int)r);
        if (!cJSON_IsArray(row)) goto bad;
        int64_t n = cJSON_GetArraySize(row);
        if (len < 0) {
            len = n;
            if (n < 1) return os_errf("%s:%lld: field '%s': empty rows", path, (long long)line, field);
            buf = os_alloc(sizeof(int32_t) * (size_t)(R * n), "sample");
        } else if (n != len) {
            os_free(buf);
            return os_errf("%s:%lld: field '%s': row %lld has %lld ids, row 0 has %lld (rows must have equal length)",
                           path, (long long)line, field, (long long)r, (long long)n, (long long)len);
        }
        int64_t k = 0;
        for (const cJSON *x = row->child; x; x = x->next, k++) {
            if (!cJSON_IsNumber(x) || x->valuedouble != (double)(int32_t)x->valuedouble) {
                os_free(buf);
                return os_errf("%s:%lld: field '%s': row %lld item %lld: expected an integer", path, (long long)line,
                               field, (long long)r, (long long)k);
            }
            buf[r * len + k] = (int32_t)x->valuedouble;
        }
    }
    *L = len;
    *out = buf;
    return 0;
bad:
    os_free(buf);
    return os_errf("%s:%lld: field '%s': expected an array of %lld arrays of integers", path, (long long)line, field, (long long)R);
}

// cut [R, L] rows to keep positions [from, from+n)
static int32_t *cut(int32_t *a, int64_t R, int64_t L, int64_t from, int64_t n) {
    int32_t *o = os_alloc(sizeof(int32_t) * (size_t)(R * n), "sample");
    for (int64_t r = 0; r < R; r++) memcpy(o + r * n, a + r * L + from, sizeof(int32_t) * (size_t)n);
    os_free(a);
    return o;
}

static int pt_get(os_dataset *d, int64_t i, os_sample *s) {
    pretok_ds *p = (pretok_ds *)d;
    memset(s, 0, sizeof *s);
    s->R = p->R, s->L = p->L[i], s->ids = p->ids[i], s->labels = p->labels[i], s->wav_index = -1;
    return 0;
}

static void pt_free(os_dataset *d) {
    pretok_ds *p = (pretok_ds *)d;
    for (int64_t i = 0; i < d->n; i++) os_free(p->ids[i]), os_free(p->labels[i]);
    os_free(p->ids), os_free(p->labels), os_free(p->L), os_free(p);
}

os_dataset *os_pretok_open(const char *path, int64_t R, int64_t max_length, const char *trunc) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        os_errf("%s: cannot open the dataset: %m", path);
        return NULL;
    }
    pretok_ds *p = os_alloc(sizeof *p, "dataset");
    p->base.path = path, p->base.get = pt_get, p->base.free = pt_free, p->R = R;
    int64_t cap = 0, line = 0;
    char *buf = NULL;
    size_t bcap = 0;
    ssize_t got;
    int rc = 0;
    while ((got = getline(&buf, &bcap, f)) > 0) {
        line++;
        char *s = buf;
        while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') s++;
        if (!*s) continue;
        cJSON *o = cJSON_Parse(s);
        if (!o || !cJSON_IsObject(o)) {
            cJSON_Delete(o);
            rc = os_errf("%s:%lld: not a JSON object", path, (long long)line);
            break;
        }
        int64_t L1 = 0, L2 = 0;
        int32_t *ids = NULL, *lab = NULL;
        if (read_rows(cJSON_GetObjectItemCaseSensitive(o, "input_ids"), path, line, "input_ids", R, &L1, &ids) < 0 ||
            read_rows(cJSON_GetObjectItemCaseSensitive(o, "labels"), path, line, "labels", R, &L2, &lab) < 0) {
            os_free(ids);
            cJSON_Delete(o);
            rc = -1;
            break;
        }
        cJSON_Delete(o);
        if (L1 != L2) {
            os_free(ids), os_free(lab);
            rc = os_errf("%s:%lld: 'input_ids' has %lld positions but 'labels' has %lld", path, (long long)line, (long long)L1, (long long)L2);
            break;
        }
        if (L1 > max_length) {
            if (!strcmp(trunc, "delete")) {
                os_free(ids), os_free(lab);
                p->base.skipped++;
                continue;
            }
            int64_t from = !strcmp(trunc, "left") ? L1 - max_length : 0;
            ids = cut(ids, R, L1, from, max_length), lab = cut(lab, R, L1, from, max_length);
            L1 = max_length;
        }
        if (p->base.n == cap) {
            int64_t nc = cap ? 2 * cap : 64;
            int32_t **ni = os_alloc(sizeof(int32_t *) * (size_t)nc, "dataset"), **nl = os_alloc(sizeof(int32_t *) * (size_t)nc, "dataset");
            int64_t *nL = os_alloc(sizeof(int64_t) * (size_t)nc, "dataset");
            if (cap) {
                memcpy(ni, p->ids, sizeof(int32_t *) * (size_t)cap), memcpy(nl, p->labels, sizeof(int32_t *) * (size_t)cap);
                memcpy(nL, p->L, sizeof(int64_t) * (size_t)cap);
            }
            os_free(p->ids), os_free(p->labels), os_free(p->L);
            p->ids = ni, p->labels = nl, p->L = nL, cap = nc;
        }
        p->ids[p->base.n] = ids, p->labels[p->base.n] = lab, p->L[p->base.n] = L1;
        p->base.n++;
    }
    free(buf);
    fclose(f);
    if (rc == 0 && p->base.n == 0) rc = os_errf("%s: no samples (%lld skipped as longer than max_length %lld)", path, (long long)p->base.skipped, (long long)max_length);
    if (rc < 0) {
        pt_free(&p->base);
        return NULL;
    }
    return &p->base;
}

void os_collate(os_batch *b, const os_sample *s, int64_t n, int32_t pad_id) {
    int64_t lead = 0, tail = 0, R = n ? s[0].R : 1;
    for (int64_t i = 0; i < n; i++) {
        if (s[i].lead > lead) lead = s[i].lead;
        if (s[i].L - s[i].lead > tail) tail = s[i].L - s[i].lead;
    }
    int64_t L = lead + tail;
    os_batch_alloc(b, n, R, L);
    for (int64_t i = 0; i < n; i++) {
        int64_t shift = lead - s[i].lead;   // left padding of this sample
        for (int64_t r = 0; r < R; r++)
            for (int64_t p = 0; p < L; p++) {
                int64_t q = p - shift, o = (i * R + r) * L + p;
                int in = q >= 0 && q < s[i].L;
                b->ids[o] = in ? s[i].ids[r * s[i].L + q] : pad_id;
                b->labels[o] = in ? s[i].labels[r * s[i].L + q] : -100;
            }
        for (int64_t p = 0; p < L; p++) {
            int64_t q = p - shift;
            int in = q >= 0 && q < s[i].L;
            b->keymask[i * L + p] = (uint8_t)in;
            b->speech[i * L + p] = (uint8_t)(in && s[i].speech ? s[i].speech[q] : 0);
        }
    }
}
