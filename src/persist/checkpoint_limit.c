// --save_total_limit (persist/checkpoint_limit.h).
#include "persist/checkpoint_limit.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/atomic.h"
#include "io/json_kind.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    int64_t step;
    double eval_loss;   // NAN: no evaluation at this step
} ckpt;

static int by_step(const void *a, const void *b) {
    int64_t x = ((const ckpt *)a)->step, y = ((const ckpt *)b)->step;
    return (x > y) - (x < y);
}

// the complete checkpoints of dir (checkpoint-DIGITS with a manifest.json), by step; *n = count
static ckpt *list_checkpoints(const char *dir, int *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    int cap = 16;
    ckpt *c = os_alloc(sizeof(ckpt) * (size_t)cap, "checkpoint list");
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *s = e->d_name;
        if (strncmp(s, "checkpoint-", 11) || !s[11] || strspn(s + 11, "0123456789") != strlen(s + 11)) continue;
        char man[4400];
        snprintf(man, sizeof man, "%s/%s/manifest.json", dir, s);
        if (access(man, F_OK) != 0) continue;
        if (*n == cap) {
            ckpt *g = os_alloc(sizeof(ckpt) * (size_t)cap * 2, "checkpoint list");
            memcpy(g, c, sizeof(ckpt) * (size_t)cap);
            os_free(c);
            c = g, cap *= 2;
        }
        c[(*n)++] = (ckpt){.step = strtoll(s + 11, NULL, 10), .eval_loss = NAN};
    }
    closedir(d);
    qsort(c, (size_t)*n, sizeof *c, by_step);
    return c;
}

// eval_loss of the logging.jsonl lines at checkpoint steps (the last line of a step counts)
static void read_eval_losses(const char *dir, ckpt *c, int n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/logging.jsonl", dir);
    if (access(path, F_OK) != 0) return;
    char *text = os_read_file(path, NULL);
    if (!text) return;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (!strstr(line, "\"eval_loss\"")) continue;
        cJSON *o = cJSON_Parse(line);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "step"), *el = cJSON_GetObjectItemCaseSensitive(o, "eval_loss");
        int64_t step;
        for (int i = 0; os_json_int(st, 0, INT64_MAX, &step) && cJSON_IsNumber(el) && i < n; i++)
            if (c[i].step == step) c[i].eval_loss = el->valuedouble;
        cJSON_Delete(o);
    }
    os_free(text);
}

int os_checkpoint_limit(const char *output_dir, int64_t limit) {
    int n, removed = 0;
    ckpt *c = limit > 0 ? list_checkpoints(output_dir, &n) : NULL;
    if (!c || n <= limit) {
        os_free(c);
        return 0;
    }
    read_eval_losses(output_dir, c, n);
    int best = -1;
    for (int i = 0; i < n; i++)
        if (isfinite(c[i].eval_loss) && (best < 0 || c[i].eval_loss < c[best].eval_loss)) best = i;
    for (int i = 0; i < n - limit; i++) {
        if (i == best) continue;
        char dir[4200], tmp[4300];
        snprintf(dir, sizeof dir, "%s/checkpoint-%lld", output_dir, (long long)c[i].step);
        snprintf(tmp, sizeof tmp, "%s.tmp", dir);
        int rc = os_rm_rf(tmp);
        if (rc == 0 && rename(dir, tmp) != 0) rc = os_errf("%s: cannot rename to %s: %s", dir, tmp, strerror(errno));
        if (rc == 0) rc = os_rm_rf(tmp);
        if (rc < 0) os_info("warning: --save_total_limit: %s is kept: %s", dir, os_errmsg());
        else removed++;
    }
    os_free(c);
    return removed;
}

int os_checkpoint_resolve(const char *arg, const char *output_dir, char *out, size_t n) {
    if (!arg || !strcmp(arg, "false") || !strcmp(arg, "False") || !strcmp(arg, "0")) return 2;
    int flag = !strcmp(arg, "true") || !strcmp(arg, "True") || !strcmp(arg, "1");
    const char *dir = flag ? output_dir : arg;
    char man[4400];
    snprintf(man, sizeof man, "%s/manifest.json", dir);
    struct stat st;
    if (!flag && (access(man, F_OK) == 0 || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) return 0;   // a checkpoint
    int count;
    ckpt *c = list_checkpoints(dir, &count);
    int rc = count > 0 ? 1 : os_errf("--resume_from_checkpoint %s: %s holds no complete checkpoint (a checkpoint-STEP "
                                     "folder with its manifest.json)", arg, dir);
    if (rc == 1) snprintf(out, n, "%s/checkpoint-%lld", dir, (long long)c[count - 1].step);
    os_free(c);
    return rc;
}
