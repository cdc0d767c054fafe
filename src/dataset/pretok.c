#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "audio/audio.h"
#include "dataset/dataset.h"
#include "dataset/jsonrec.h"
#include "dataset/pretok.h"
#include "io/atomic.h"
#include "io/json_kind.h"
#include "tokenizer/utf8.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// optional speech input of a sample (docs/dataset.md, "Speech input in pretokenized samples")
typedef struct {
    char *wav;         // resolved path, or NULL
    int64_t start;     // first speech position (after truncation)
    int64_t line;      // source line, for messages
    int64_t full;      // positions before --max_length cut it (os_sample.need), 0: whole
    uint8_t *mask;     // [L] speech positions, built by os_pretok_speech_len
} pt_speech;

typedef struct {
    os_dataset base;
    int64_t R;
    int64_t *L;
    int32_t **ids, **labels;   // per sample [R, L]
    pt_speech *sp;             // per sample
} pretok_ds;

// "speech_wav" and "speech_start" (both or neither): *wav = the file (relative: next to the dataset file if it
// exists there, else from the current directory) checked as audio, or NULL
static int read_speech(const cJSON *o, const char *path, int64_t line, char **wav, int64_t *start) {
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "speech_wav"), *st = cJSON_GetObjectItemCaseSensitive(o, "speech_start");
    *wav = NULL;
    if (!w && !st) return 0;
    if (!w || !cJSON_IsString(w) || !w->valuestring[0])
        return os_errf("%s:%lld: field 'speech_wav': expected a WAV path string (with 'speech_start')", path, (long long)line);
    if (!os_json_int(st, 0, INT64_MAX, start))
        return os_errf("%s:%lld: field 'speech_start': expected a position >= 0 (with 'speech_wav')", path, (long long)line);
    const char *name = w->valuestring, *slash = strrchr(path, '/');
    size_t n = strlen(name) + strlen(path) + 2;
    char *res = os_alloc(n, "speech_wav path");
    struct stat sb;
    snprintf(res, n, "%.*s/%s", (int)(slash ? slash - path : 0), path, name);
    if (name[0] == '/' || !slash || stat(res, &sb) != 0) snprintf(res, n, "%s", name);
    if (os_audio_check(res) < 0) {
        os_free(res);
        return os_err_ctx("%s:%lld: field 'speech_wav'", path, (long long)line);
    }
    *wav = res;
    return 0;
}

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
            int64_t v;
            if (!os_json_int(x, INT32_MIN, INT32_MAX, &v)) {
                os_free(buf);
                return os_errf("%s:%lld: field '%s': row %lld item %lld: expected an integer", path, (long long)line,
                               field, (long long)r, (long long)k);
            }
            buf[r * len + k] = (int32_t)v;
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
    s->R = p->R, s->L = p->L[i], s->ids = p->ids[i], s->labels = p->labels[i], s->wav_index = -1, s->need = p->sp[i].full;
    if (p->sp[i].mask) s->speech = p->sp[i].mask, s->wav_index = i;
    return 0;
}

static const char *pt_wav_path(os_dataset *d, int64_t i) {
    pretok_ds *p = (pretok_ds *)d;
    return i >= 0 && i < d->n ? p->sp[i].wav : NULL;
}

int os_pretok_speech_len(os_dataset *d, int64_t T_s) {
    if (d->get != pt_get) return 0;
    pretok_ds *p = (pretok_ds *)d;
    for (int64_t i = 0; i < d->n; i++) {
        pt_speech *q = &p->sp[i];
        if (!q->wav) continue;
        long long ln = (long long)q->line;
        if (T_s < 1)
            return os_errf("%s:%lld: field 'speech_wav': the sample has a speech input but the model has no speech "
                           "encoder (--speech_encoder DIR)", d->path, ln);
        if (q->start < 0 || q->start + T_s > p->L[i])
            return os_errf("%s:%lld: field 'speech_start': the speech span [%lld, %lld) (%lld positions from the encoder) "
                           "does not fit in the sample's %lld positions%s", d->path, ln, (long long)q->start,
                           (long long)(q->start + T_s), (long long)T_s, (long long)p->L[i],
                           q->start < 0 ? " (cut by --truncation_strategy left)" : "");
        for (int64_t r = 0; r < p->R; r++)
            for (int64_t k = q->start; k < q->start + T_s; k++)
                if (p->labels[i][r * p->L[i] + k] != -100)
                    return os_errf("%s:%lld: field 'labels': row %lld position %lld is inside the speech span [%lld, %lld) "
                                   "and must be -100", d->path, ln, (long long)r, (long long)k, (long long)q->start,
                                   (long long)(q->start + T_s));
        os_free(q->mask);
        q->mask = os_alloc((size_t)p->L[i], "speech mask");
        memset(q->mask + q->start, 1, (size_t)T_s);
    }
    return 0;
}

static void pt_free(os_dataset *d) {
    pretok_ds *p = (pretok_ds *)d;
    for (int64_t i = 0; i < d->n; i++) os_free(p->ids[i]), os_free(p->labels[i]), os_free(p->sp[i].wav), os_free(p->sp[i].mask);
    os_free(p->ids), os_free(p->labels), os_free(p->L), os_free(p->sp), os_free(p);
}

os_dataset *os_pretok_open(const char *path, int64_t R, int64_t max_length, const char *trunc) {
    FILE *f = os_fopen_read(path, "the dataset");
    if (!f) return NULL;
    pretok_ds *p = os_alloc(sizeof *p, "dataset");
    p->base.path = path, p->base.get = pt_get, p->base.free = pt_free, p->R = R;
    p->base.wav_path = pt_wav_path;
    int64_t cap = 0, line = 0;
    char *buf = NULL;
    size_t bcap = 0;
    ssize_t got;
    int rc = 0;
    p->base.digest = OS_FNV_BASIS;
    while ((got = getline(&buf, &bcap, f)) > 0) {
        line++;
        p->base.digest = os_fnv1a(p->base.digest, buf, (size_t)got), p->base.bytes += got;
        if ((rc = os_jsonrec_no_nul(buf, (size_t)got, path, line)) < 0) break;   // before a NUL could end the line early
        if (!(line & 0xfff) && os_stop_signal) {   // a large file: a stop signal is acted on while it is read
            rc = os_errf("%s: %s received while reading the dataset (line %lld): stopped before the first step", path,
                         os_stop_signal == SIGINT ? "SIGINT" : "SIGTERM", (long long)line);
            break;
        }
        char *s = buf;
        while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') s++;
        if (!*s) continue;
        int64_t bad = os_utf8_invalid_at(buf, (size_t)got);
        if (bad >= 0) {
            rc = os_errf("%s:%lld: not valid UTF-8 (byte %lld of the line)", path, (long long)line, (long long)bad);
            break;
        }
        cJSON *o = cJSON_Parse(s);
        if (!o || !cJSON_IsObject(o)) {
            cJSON_Delete(o);
            rc = os_errf("%s:%lld: not a JSON object", path, (long long)line);
            break;
        }
        int64_t L1 = 0, L2 = 0, start = 0;
        int32_t *ids = NULL, *lab = NULL;
        char *wav = NULL;
        if (read_rows(cJSON_GetObjectItemCaseSensitive(o, "input_ids"), path, line, "input_ids", R, &L1, &ids) < 0 ||
            read_rows(cJSON_GetObjectItemCaseSensitive(o, "labels"), path, line, "labels", R, &L2, &lab) < 0 ||
            read_speech(o, path, line, &wav, &start) < 0) {
            os_free(ids), os_free(lab);
            cJSON_Delete(o);
            rc = -1;
            break;
        }
        cJSON_Delete(o);
        if (L1 != L2) {
            os_free(ids), os_free(lab), os_free(wav);
            rc = os_errf("%s:%lld: 'input_ids' has %lld positions but 'labels' has %lld", path, (long long)line, (long long)L1, (long long)L2);
            break;
        }
        int64_t full = L1 > max_length ? L1 : 0;
        if (L1 > max_length) {
            if (!strcmp(trunc, "delete")) {
                os_free(ids), os_free(lab), os_free(wav);
                p->base.skipped++;
                continue;
            }
            int64_t from = !strcmp(trunc, "left") ? L1 - max_length : 0;
            ids = cut(ids, R, L1, from, max_length), lab = cut(lab, R, L1, from, max_length);
            L1 = max_length;
            start -= from;
        }
        if (p->base.n == cap) {
            int64_t nc = cap ? 2 * cap : 64;
            int32_t **ni = os_alloc(sizeof(int32_t *) * (size_t)nc, "dataset"), **nl = os_alloc(sizeof(int32_t *) * (size_t)nc, "dataset");
            int64_t *nL = os_alloc(sizeof(int64_t) * (size_t)nc, "dataset");
            pt_speech *ns = os_alloc(sizeof(pt_speech) * (size_t)nc, "dataset");
            if (cap) {
                memcpy(ni, p->ids, sizeof(int32_t *) * (size_t)cap), memcpy(nl, p->labels, sizeof(int32_t *) * (size_t)cap);
                memcpy(nL, p->L, sizeof(int64_t) * (size_t)cap), memcpy(ns, p->sp, sizeof(pt_speech) * (size_t)cap);
            }
            os_free(p->ids), os_free(p->labels), os_free(p->L), os_free(p->sp);
            p->ids = ni, p->labels = nl, p->L = nL, p->sp = ns, cap = nc;
        }
        p->ids[p->base.n] = ids, p->labels[p->base.n] = lab, p->L[p->base.n] = L1;
        p->sp[p->base.n] = (pt_speech){.wav = wav, .start = start, .line = line, .full = full};
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
