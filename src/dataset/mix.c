// Mixed datasets: several sources, each whole or sampled (PATH#N), in one seeded order (dataset/mix.h).
#include "dataset/mix.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "dataset/sampler.h"
#include <errno.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    os_dataset base;
    os_dataset *src[OS_MAX_SOURCES];
    int nsrc;
    int64_t first[OS_MAX_SOURCES + 1];   // source k's wav indices are first[k] + its own (first[k] = sum of earlier n)
    int32_t *which;                      // [n] source of mixed sample i
    int64_t *index;                      // [n] its index in that source
    char *spec;                          // the specs as given, joined (messages)
    char *path[OS_MAX_SOURCES];          // the sources' files (they refer to these until freed)
} mix_ds;

int os_data_source_parse(const char *spec, char **path, int64_t *sample) {
    const char *hash = strrchr(spec, '#');
    *sample = -1;
    size_t len = strlen(spec);
    if (hash && hash[1] && strspn(hash + 1, "0123456789") == strlen(hash + 1)) {
        errno = 0;
        long long v = strtoll(hash + 1, NULL, 10);
        if (errno || v < 1 || v > (1LL << 40))
            return os_errf("--dataset '%s': #N takes N samples, expected 1 <= N <= %lld, got '%s'", spec, 1LL << 40, hash + 1);
        *sample = v, len = (size_t)(hash - spec);
    }
    *path = os_alloc(len + 1, "dataset path");
    memcpy(*path, spec, len);
    (*path)[len] = 0;
    return 0;
}

void os_data_source_pick(int64_t *idx, int64_t n, int64_t sample, int shuffle, uint64_t seed) {
    if (sample < 0) sample = n;
    int64_t k = 0, rem = n > 0 ? sample % n : 0;
    for (int64_t r = 0; n > 0 && r < sample / n; r++)
        for (int64_t i = 0; i < n; i++) idx[k++] = i;
    if (!rem) return;
    int64_t *perm = os_alloc(sizeof(int64_t) * (size_t)n, "sample pick");
    if (shuffle) os_epoch_perm(perm, n, seed, 0);
    else
        for (int64_t i = 0; i < n; i++) perm[i] = i;
    memcpy(idx + k, perm, sizeof(int64_t) * (size_t)rem);
    os_free(perm);
}

static int mix_get(os_dataset *d, int64_t i, os_sample *s) {
    mix_ds *m = (mix_ds *)d;
    int k = m->which[i];
    if (m->src[k]->get(m->src[k], m->index[i], s) < 0) return -1;
    if (s->wav_index >= 0) s->wav_index += m->first[k];
    return 0;
}

static const char *mix_wav(os_dataset *d, int64_t w) {
    mix_ds *m = (mix_ds *)d;
    for (int k = 0; k < m->nsrc; k++)
        if (w >= m->first[k] && w < m->first[k + 1])
            return m->src[k]->wav_path ? m->src[k]->wav_path(m->src[k], w - m->first[k]) : NULL;
    return NULL;
}

static void mix_free(os_dataset *d) {
    mix_ds *m = (mix_ds *)d;
    for (int k = 0; k < m->nsrc; k++) m->src[k]->free(m->src[k]);
    for (int k = 0; k < OS_MAX_SOURCES; k++) os_free(m->path[k]);
    os_free(m->which), os_free(m->index), os_free(m->spec), os_free(m);
}

int os_dataset_sources(os_dataset *d, os_dataset **src) {
    if (!d->nsources) {
        src[0] = d;
        return 1;
    }
    memcpy(src, d->sources, sizeof(os_dataset *) * (size_t)d->nsources);
    return d->nsources;
}

// the memory this host has for new allocations (MemAvailable; else the free pages), bytes
static int64_t host_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    long long kb = -1;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb >= 0 ? (int64_t)kb * 1024 : (int64_t)sysconf(_SC_AVPHYS_PAGES) * (int64_t)sysconf(_SC_PAGESIZE);
}

// -1 + message when a stop signal came (SIGINT, SIGTERM): checked every 2^20 samples of the loops below
static int stopped(int64_t i, int64_t n, const char *what) {
    if ((i & 0xfffff) || !os_stop_signal) return 0;
    return os_errf("%s received while %s (%lld of %lld samples): stopped before the first step",
                   os_stop_signal == SIGINT ? "SIGINT" : "SIGTERM", what, (long long)i, (long long)n);
}

// the sample list: each source's pick in turn, then (shuffle) one permutation of all; -1 + message
static int mix_order(mix_ds *m, const int64_t *sample, int shuffle, uint64_t seed) {
    int64_t n = 0;
    for (int k = 0; k < m->nsrc; k++) {
        if (sample[k] > 0 && m->src[k]->n == 0)
            return os_errf("%s: #%lld asks for samples of a file that has none", m->src[k]->path, (long long)sample[k]);
        n += sample[k] < 0 ? m->src[k]->n : sample[k];
    }
    // one table entry per sample (its source and index, and the run's order of them): bounded by this host's memory
    int64_t per = OS_MIX_BYTES_PER_SAMPLE(shuffle), avail = host_available();
    if (n > avail / per)
        return os_errf("--dataset %s: %lld samples; their tables (the source and index of each sample, the shuffled "
                       "order, each epoch's order: %lld bytes per sample) need %.3g GB, and this host has %.3g GB "
                       "available: give a smaller #N (a file's samples are repeated, not copied, so its records take "
                       "no more memory)", m->spec, (long long)n, (long long)per, (double)n * (double)per / 1e9,
                       (double)avail / 1e9);
    int32_t *which = os_alloc(sizeof(int32_t) * (size_t)(n ? n : 1), "mixed sources");
    int64_t *index = os_alloc(sizeof(int64_t) * (size_t)(n ? n : 1), "mixed indices"), at = 0;
    for (int k = 0; k < m->nsrc; k++) {
        int64_t c = sample[k] < 0 ? m->src[k]->n : sample[k];
        os_data_source_pick(index + at, m->src[k]->n, sample[k], shuffle, os_rng_u64(seed ^ 0x5a3b1eULL, (uint64_t)k));
        for (int64_t i = 0; i < c; i++) {
            if (stopped(i, c, "building the mixed dataset's sample list") < 0) {
                os_free(which), os_free(index);
                return -1;
            }
            which[at + i] = k;
        }
        at += c;
    }
    m->which = which, m->index = index, m->base.n = n;
    if (!shuffle || n < 2) return 0;
    int64_t *perm = os_alloc(sizeof(int64_t) * (size_t)n, "mixed order");
    os_epoch_perm(perm, n, seed ^ 0x3c0ffeeULL, 0);
    if (stopped(0, n, "shuffling the mixed dataset") < 0) {
        os_free(perm), os_free(which), os_free(index);
        return -1;
    }
    m->which = os_alloc(sizeof(int32_t) * (size_t)n, "mixed sources"), m->index = os_alloc(sizeof(int64_t) * (size_t)n, "mixed indices");
    for (int64_t i = 0; i < n; i++) m->which[i] = which[perm[i]], m->index[i] = index[perm[i]];
    os_free(perm), os_free(which), os_free(index);
    return 0;
}

// size, digest and the rest of the view from the sources: the digest covers every file's, the counts, shuffle, seed
static void mix_summary(mix_ds *m, const int64_t *sample, int shuffle, uint64_t seed) {
    uint64_t h = OS_FNV_BASIS;
    int64_t live = 0;
    for (int k = 0; k < m->nsrc; k++) {
        const os_dataset *s = m->src[k];
        int64_t v[3] = {s->bytes, (int64_t)s->digest, sample[k]};
        h = os_fnv1a(h, v, sizeof v);
        m->base.bytes += s->bytes;
        m->first[k + 1] = m->first[k] + s->n;
        if (s->live && (!live || s->live < live)) live = s->live;   // a source's samples stay valid for its own gets
    }
    int64_t tail[2] = {shuffle, (int64_t)seed};
    m->base.digest = os_fnv1a(h, tail, sizeof tail);
    m->base.live = live;
    m->base.sources = m->src, m->base.nsources = m->nsrc;
}

os_dataset *os_dataset_open_list(const char *const *specs, int n, const os_data_sizes *z, const char *model_dir,
                                 int64_t max_length, const char *truncation, int shuffle, uint64_t seed, const char *role) {
    if (n < 1 || n > OS_MAX_SOURCES) {
        os_errf("--dataset: expected 1 to %d files, got %d", OS_MAX_SOURCES, n);
        return NULL;
    }
    int64_t sample[OS_MAX_SOURCES];
    char *path[OS_MAX_SOURCES] = {0};
    int ok = 1;
    for (int k = 0; k < n && ok; k++) ok = os_data_source_parse(specs[k], &path[k], &sample[k]) == 0;
    if (ok && n == 1 && sample[0] < 0) {   // one whole file: that dataset itself, as before mixing existed
        os_free(path[0]);
        return os_dataset_open(specs[0], z, model_dir, max_length, truncation);
    }
    mix_ds *m = os_alloc(sizeof *m, "mixed dataset");
    memset(m, 0, sizeof *m);
    memcpy(m->path, path, sizeof path);   // freed with the mix, after the sources that refer to them
    for (int k = 0; k < n && ok; k++) {
        m->src[k] = os_dataset_open(path[k], z, model_dir, max_length, truncation);
        ok = m->src[k] != NULL;
        if (ok) m->nsrc = k + 1;
    }
    size_t len = 1;
    for (int k = 0; k < n; k++) len += strlen(specs[k]) + 1;
    m->spec = os_alloc(len, "mixed dataset name");
    m->spec[0] = 0;
    for (int k = 0; k < n; k++) strcat(strcat(m->spec, k ? " " : ""), specs[k]);
    m->base = (os_dataset){.path = m->spec, .get = mix_get, .free = mix_free, .wav_path = mix_wav};
    uint64_t key = os_hash_str(role, seed);
    if (ok) ok = mix_order(m, sample, shuffle, key) == 0;
    if (ok) mix_summary(m, sample, shuffle, seed);
    if (!ok) {
        mix_free(&m->base);
        return NULL;
    }
    return &m->base;
}
