#include "session/speech_cache.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *TENSOR = "encoder_output", *META = "omnishard_key";

// "path size mtime" of a file, or "path absent"
static int file_sig(const char *path, char *out, size_t n) {
    struct stat st;
    if (stat(path, &st) != 0) return snprintf(out, n, "%s absent", path);
    return snprintf(out, n, "%s %lld %lld.%09ld", path, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                    (long)st.st_mtim.tv_nsec);
}

int os_feat_cache_encoder_id(const char *enc_dir, char *out, size_t n) {
    char real[PATH_MAX];
    if (!realpath(enc_dir, real)) return os_errf("%s: cannot resolve the speech encoder directory: %s", enc_dir, strerror(errno));
    static const char *const files[] = {"config.json", "model.safetensors", "model.safetensors.index.json"};
    size_t k = (size_t)snprintf(out, n, "encoder=%s", real);
    for (size_t i = 0; i < sizeof files / sizeof files[0] && k < n; i++) {
        char p[PATH_MAX + 64], sig[PATH_MAX + 128];
        snprintf(p, sizeof p, "%s/%s", real, files[i]);
        file_sig(p, sig, sizeof sig);
        k += (size_t)snprintf(out + k, n - k, "|%s", sig);
    }
    if (k >= n) return os_errf("%s: speech encoder path too long for the feature cache key", enc_dir);
    return 0;
}

char *os_feat_cache_key(const char *wav, const char *enc_id, int64_t n_wave, int64_t T, int64_t d) {
    char real[PATH_MAX], sig[PATH_MAX + 128];
    struct stat st;
    if (!realpath(wav, real) || stat(real, &st) != 0) {
        os_errf("%s: cannot open audio file: %s", wav, strerror(errno));
        return NULL;
    }
    file_sig(real, sig, sizeof sig);
    size_t n = strlen(sig) + strlen(enc_id) + 200;
    char *key = os_alloc(n, "feature cache key");
    snprintf(key, n, "omnishard speech features v1|wav=%s|%s|samples=%lld|frames=%lld|d=%lld", sig, enc_id,
             (long long)n_wave, (long long)T, (long long)d);
    return key;
}

static void cache_path(const char *dir, const char *key, char *out, size_t n) {
    snprintf(out, n, "%s/%016llx%016llx.safetensors", dir, (unsigned long long)os_hash_str(key, 0),
             (unsigned long long)os_hash_str(key, 0x5bd1e995u));
}

int os_feat_cache_read(const char *dir, const char *key, float *out, int64_t T, int64_t d) {
    char path[PATH_MAX + 64];
    cache_path(dir, key, path, sizeof path);
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    os_st_file *f = os_st_open(path);
    if (!f) return 0;
    const char *k = os_st_metadata(f, META);
    const os_st_tensor *t = os_st_find(f, TENSOR);
    int hit = k && !strcmp(k, key) && t && t->dtype == OS_DT_F32 && t->ndim == 2 && t->shape[0] == T &&
              t->shape[1] == d && os_st_read_f32(t, 0, T * d, out) == 0;
    os_st_close(f);
    return hit;
}

int os_feat_cache_write(const char *dir, const char *key, const float *x, int64_t T, int64_t d) {
    char path[PATH_MAX + 64];
    cache_path(dir, key, path, sizeof path);
    int64_t shape[1][8] = {{T, d}};
    int ndim = 2;
    const char *meta[] = {META, key, NULL};
    return os_st_write_f32(path, 1, &TENSOR, &ndim, (const int64_t(*)[8])shape, &x, meta);
}
