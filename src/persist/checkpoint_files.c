#include "persist/checkpoint_files.h"
#include "core/err.h"
#include "io/json_kind.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int is_rank_file(const char *name) {
    return !strncmp(name, "rank-", 5) && strspn(name + 5, "0123456789") == 5 && !strcmp(name + 10, ".safetensors");
}

// the regular files of dir/sub (sub "": dir itself; its directories one level down, e.g. lora_adapter/) into fs
static int record_dir(cJSON *fs, const char *dir, const char *sub) {
    char here[4400];
    snprintf(here, sizeof here, "%s%s%s", dir, *sub ? "/" : "", sub);
    DIR *d = opendir(here);
    if (!d) return os_errf("%s: cannot list: %s", here, strerror(errno));
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        char path[4700], name[4400], cs[32];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", here, e->d_name);
        snprintf(name, sizeof name, "%s%s%s", sub, *sub ? "/" : "", e->d_name);
        if (e->d_name[0] == '.' || (!*sub && (!strcmp(e->d_name, "manifest.json") || is_rank_file(e->d_name))) ||
            lstat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode) && !*sub) rc = record_dir(fs, dir, e->d_name);
        if (!S_ISREG(st.st_mode)) continue;
        int64_t bytes;
        uint64_t sum;
        if ((rc = os_file_checksum(path, &bytes, &sum)) < 0) break;
        snprintf(cs, sizeof cs, "%016llx", (unsigned long long)sum);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "name", name);
        cJSON_AddNumberToObject(f, "bytes", (double)bytes);
        cJSON_AddStringToObject(f, "fnv1a64", cs);
        cJSON_AddItemToArray(fs, f);
    }
    closedir(d);
    return rc;
}

int os_ckpt_files_record(cJSON *manifest, const char *dir) {
    return record_dir(cJSON_AddArrayToObject(manifest, "model_files"), dir, "");
}

// a recorded name: FILE or DIR/FILE, no empty, "." or ".." part (nothing outside the checkpoint is read)
static int name_ok(const char *n) {
    const char *slash = strchr(n, '/');
    if (slash && strchr(slash + 1, '/')) return 0;
    if (!*n || n[0] == '/' || n[0] == '.' || (slash && (slash[1] == 0 || slash[1] == '.'))) return 0;
    return 1;
}

int os_ckpt_files_verify(const cJSON *manifest, const char *dir) {
    const cJSON *fs = cJSON_GetObjectItemCaseSensitive(manifest, "model_files"), *f;
    if (!fs) return 0;
    if (!cJSON_IsArray(fs)) return os_errf("%s/manifest.json: field 'model_files': expected an array", dir);
    int i = 0;
    cJSON_ArrayForEach(f, fs) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name"), *by = cJSON_GetObjectItemCaseSensitive(f, "bytes"),
                    *cs = cJSON_GetObjectItemCaseSensitive(f, "fnv1a64");
        int64_t want;
        if (!cJSON_IsString(nm) || !name_ok(nm->valuestring) || !os_json_int(by, 0, INT64_MAX, &want) || !cJSON_IsString(cs))
            return os_errf("%s/manifest.json: model_files[%d]: expected name, bytes and fnv1a64", dir, i);
        char path[4400], have[32];
        snprintf(path, sizeof path, "%s/%s", dir, nm->valuestring);
        int64_t bytes;
        uint64_t sum;
        if (os_file_checksum(path, &bytes, &sum) < 0) return os_err_ctx("checkpoint file listed in %s/manifest.json", dir);
        snprintf(have, sizeof have, "%016llx", (unsigned long long)sum);
        if (bytes != want || strcmp(have, cs->valuestring))
            return os_errf("%s: size %lld / checksum %s do not match the manifest's %lld / %s (the file was changed "
                           "after the checkpoint was written, or is damaged)", path, (long long)bytes, have,
                           (long long)want, cs->valuestring);
        i++;
    }
    return 0;
}
