// The dataset format dispatcher, train/validation split views, and the global count of skipped samples.
#include "core/alloc.h"
#include "core/err.h"
#include "io/atomic.h"
#include "dataset/dataset.h"
#include "dataset/jsonrec.h"
#include "dataset/pack.h"
#include "dataset/sampler.h"
#include "dataset/slam_dataset.h"
#include "io/hfconfig.h"
#include "io/atomic.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// 1 when the first record of path is pretokenized ("input_ids"), 0 when not, -1 + message on error
static int is_pretok(const char *path) {
    FILE *f = os_fopen_read(path, "the dataset (a JSON Lines or JSON file)");
    if (!f) return -1;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    // the key appears near the start of a pretokenized record; look in the first record's head only
    os_jsonrec jr;
    if (os_jsonrec_begin(&jr, buf, n, path) < 0) return -1;
    size_t off = 0, len = n;
    int64_t line;
    if (!jr.array && os_jsonrec_next(&jr, &off, &len, &line) < 0) len = n - off;
    const char *head = buf + off, *hit = NULL;
    size_t m = len;
    for (size_t i = 0; i + 11 <= m && !hit; i++)
        if (!memcmp(head + i, "\"input_ids\"", 11)) hit = head + i;
    if (!hit) return 0;
    if (jr.array) return os_errf("%s: pretokenized samples must be JSON Lines (one {\"input_ids\", \"labels\"} object per line), not a JSON array", path);
    return 1;
}

// A folder as the dataset: the records file omnishard convert wrote there (its convert_state.json names it and says
// whether the conversion finished). *path becomes that file (kept for the process: the dataset refers to it); 0, or
// -1 + message for another folder or an unfinished conversion.
static int convert_folder(const char **path) {
    struct stat st;
    if (stat(*path, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    static char files[8][4200];   // the datasets of one process: training, evaluation, inference
    static int used;
    char state[4200];
    snprintf(state, sizeof state, "%s/convert_state.json", *path);
    size_t n;
    char *text = os_read_file(state, &n);
    if (!text)
        return os_errf("%s: is a directory, expected the dataset: a .jsonl file (pretokenized or SLAM-Omni records), "
                       "or a folder that omnishard convert wrote (it holds convert_state.json)", *path);
    cJSON *o = cJSON_Parse(text);
    os_free(text);
    const cJSON *opts = cJSON_GetObjectItemCaseSensitive(o, "options"), *done = cJSON_GetObjectItemCaseSensitive(o, "done");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(opts, "jsonl");
    int rc = 0;
    if (!cJSON_IsString(name) || !cJSON_IsBool(done) || strchr(name->valuestring, '/'))
        rc = os_errf("%s: expected omnishard convert's state (options.jsonl, done)", state);
    else if (!cJSON_IsTrue(done))
        rc = os_errf("%s: omnishard convert has not finished writing %s/%s (convert_state.json: done false); run the same "
                     "convert again to complete it", *path, *path, name->valuestring);
    else {
        char *f = files[used < 7 ? used++ : 7];
        snprintf(f, sizeof files[0], "%s/%s", *path, name->valuestring);
        *path = f;
    }
    cJSON_Delete(o);
    return rc;
}

os_dataset *os_dataset_open(const char *path, const os_data_sizes *z, const char *model_dir, int64_t max_length,
                            const char *truncation) {
    if (convert_folder(&path) < 0) return NULL;
    int pre = is_pretok(path);
    if (pre < 0) return NULL;
    int64_t R = z->G > 0 ? z->G + 1 : 1;
    if (pre) return os_pretok_open(path, R, max_length, truncation);
    char tok[4200];
    snprintf(tok, sizeof tok, "%s/tokenizer.json", model_dir);
    struct stat st;
    if (stat(tok, &st) != 0) return os_model_dir_check("--model", model_dir, "tokenizer.json"), NULL;   // SLAM-Omni records need it
    os_slam_config c = {.G = z->G, .T = z->T, .A = z->A, .max_length = max_length, .truncation = truncation,
                        .tokenizer_json = tok, .speech_positions = z->speech_positions > 0 ? z->speech_positions : OS_SPEECH_POSITIONS,
                        .latency = z->latency, .layershift = z->layershift, .mask_equal = z->mask_equal,
                        .no_speech = z->no_speech, .system = z->system,
                        .keep_bad = z->keep_bad, .prompt_only = z->prompt_only};
    return os_slam_open(path, &c);
}

// ---- split views ----
typedef struct {
    os_dataset base;
    os_dataset *full;
    int64_t *index;   // view index -> full index
    int *refs;        // shared by the two views of one split
} view_ds;

static int view_get(os_dataset *d, int64_t i, os_sample *s) {
    view_ds *v = (view_ds *)d;
    return v->full->get(v->full, v->index[i], s);   // wav_index stays the full dataset's index
}

static const char *view_wav(os_dataset *d, int64_t wav_index) {
    view_ds *v = (view_ds *)d;
    return v->full->wav_path ? v->full->wav_path(v->full, wav_index) : NULL;
}

static void view_free(os_dataset *d) {
    view_ds *v = (view_ds *)d;
    if (--*v->refs == 0) {
        v->full->free(v->full);
        os_free(v->refs);
    }
    os_free(v->index), os_free(v);
}

static os_dataset *view(os_dataset *full, int64_t *index, int64_t n, int *refs) {
    view_ds *v = os_alloc(sizeof *v, "dataset view");
    v->base = *full;
    v->base.n = n, v->base.get = view_get, v->base.free = view_free, v->base.wav_path = full->wav_path ? view_wav : NULL;
    v->base.lazy_skipped = NULL, v->base.nsources = 0;   // counted on the full dataset
    v->full = full, v->index = index, v->refs = refs;
    ++*refs;
    return &v->base;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int os_dataset_split(os_dataset *d, double ratio, uint64_t seed, os_dataset **train, os_dataset **val) {
    int64_t n = d->n, nv = (int64_t)(ratio * (double)n + 0.5);
    if (!(ratio > 0.0 && ratio < 1.0)) return os_errf("--split_dataset_ratio: expected a fraction in (0, 1), got %g", ratio);
    if (n < 2) return os_errf("%s: --split_dataset_ratio needs at least 2 samples, the dataset has %lld", d->path, (long long)n);
    if (nv < 1) nv = 1;
    if (nv > n - 1) nv = n - 1;
    int64_t *perm = os_alloc(sizeof(int64_t) * (size_t)n, "split order");
    os_epoch_perm(perm, n, seed ^ 0x5b117ULL, 0);
    int64_t *vi = os_alloc(sizeof(int64_t) * (size_t)nv, "validation indices");
    int64_t *ti = os_alloc(sizeof(int64_t) * (size_t)(n - nv), "training indices");
    memcpy(vi, perm, sizeof(int64_t) * (size_t)nv);
    memcpy(ti, perm + nv, sizeof(int64_t) * (size_t)(n - nv));
    os_free(perm);
    qsort(vi, (size_t)nv, sizeof(int64_t), cmp_i64);
    qsort(ti, (size_t)(n - nv), sizeof(int64_t), cmp_i64);
    int *refs = os_alloc(sizeof(int), "split refs");
    *train = view(d, ti, n - nv, refs);
    *val = view(d, vi, nv, refs);
    return 0;
}

int64_t os_dataset_skipped_total(os_dataset *d, void (*allreduce_max)(int64_t *buf, int64_t n)) {
    if (os_pack_inner(d)) return os_dataset_skipped_total(os_pack_inner(d), allreduce_max);   // counted on its samples
    const view_ds *v = d->get == view_get ? (const view_ds *)d : NULL;
    os_dataset *full = v ? v->full : d;
    int64_t total = 0, chunk[4096];
    if (full->nsources) {   // a mix: each file's records once, however often they were sampled
        for (int k = 0; k < full->nsources; k++) total += os_dataset_skipped_total(full->sources[k], allreduce_max);
        return total;
    }
    if (full->lazy_skipped)   // the same sample may have been built on several ranks: take the max per sample
        for (int64_t s = 0; s < full->n; s += 4096) {
            int64_t m = full->n - s < 4096 ? full->n - s : 4096;
            for (int64_t i = 0; i < m; i++) chunk[i] = full->lazy_skipped[s + i];
            allreduce_max(chunk, m);
            for (int64_t i = 0; i < m; i++) total += chunk[i];
        }
    return total + full->skipped;
}
