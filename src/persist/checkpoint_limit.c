// --save_total_limit (persist/checkpoint_limit.h).
#include "persist/checkpoint_limit.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "io/atomic.h"
#include "io/runfiles.h"
#include "io/json_kind.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int64_t step;
    struct timespec written;   // manifest.json's modification time
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
        struct stat st;
        snprintf(man, sizeof man, "%s/%s/manifest.json", dir, s);
        if (stat(man, &st) != 0) continue;
        if (*n == cap) {
            ckpt *g = os_alloc(sizeof(ckpt) * (size_t)cap * 2, "checkpoint list");
            memcpy(g, c, sizeof(ckpt) * (size_t)cap);
            os_free(c);
            c = g, cap *= 2;
        }
        c[(*n)++] = (ckpt){.step = strtoll(s + 11, NULL, 10), .written = st.st_mtim};
    }
    closedir(d);
    qsort(c, (size_t)*n, sizeof *c, by_step);
    return c;
}

void os_ckpt_new_run(os_ckpt_run *run, const os_ckpt_run *resumed) {
    uint64_t id = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&id, sizeof id, 1, f) != 1) {   // no /dev/urandom: the time and the process
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        id = os_fnv1a(os_fnv1a(OS_FNV_BASIS, &t, sizeof t), &(pid_t){getpid()}, sizeof(pid_t));
    }
    if (f) fclose(f);
    snprintf(run->run_id, sizeof run->run_id, "%016llx", (unsigned long long)id);
    run->lineage[0] = 0;
    if (!resumed) return;
    char full[sizeof run->lineage + sizeof run->run_id + 32];
    snprintf(full, sizeof full, "%s%s%s@%lld", resumed->lineage, *resumed->lineage ? " " : "", resumed->run_id,
             (long long)resumed->step);
    size_t n = strlen(full), cap = sizeof run->lineage - 1;
    const char *keep = full;   // a lineage too long for the field keeps its newest runs
    if (n > cap) keep = strchr(full + n - cap, ' ') ? strchr(full + n - cap, ' ') + 1 : full + n - cap;
    memcpy(run->lineage, keep, strlen(keep) + 1);
}

// 1 when checkpoint `step` of run `id` is of run's lineage
static int of_lineage(const os_ckpt_run *run, const char *id, int64_t step) {
    if (!strcmp(id, run->run_id)) return 1;
    size_t n = strlen(id);
    for (const char *t = run->lineage; *t; t += strcspn(t, " "), t += *t == ' ')
        if (!strncmp(t, id, n) && t[n] == '@' && step <= strtoll(t + n + 1, NULL, 10)) return 1;
    return 0;
}

static void consider(os_ckpt_keeper *k, int64_t step, double loss) {
    if (isfinite(loss) && (k->best_step < 0 || loss < k->best_loss)) k->best_step = step, k->best_loss = loss;
}

static int is_live(const os_ckpt_keeper *k, int64_t step) {
    for (int i = 0; i < k->nlive; i++)
        if (k->live[i] == step) return 1;
    return 0;
}

// the best eval_loss of logging.jsonl at the lineage's checkpoint steps, line by line (the last line of a step counts)
static void read_eval_losses(os_ckpt_keeper *k, const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/logging.jsonl", dir);
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    int64_t *step = os_alloc(sizeof(int64_t) * (size_t)(k->nlive + 1), "evaluations");
    double *loss = os_alloc(sizeof(double) * (size_t)(k->nlive + 1), "evaluations");
    for (int i = 0; i < k->nlive; i++) step[i] = k->live[i], loss[i] = NAN;
    while (f && getline(&line, &cap, f) > 0) {
        if (!strstr(line, "\"eval_loss\"")) continue;
        cJSON *o = cJSON_Parse(line);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "step"), *el = cJSON_GetObjectItemCaseSensitive(o, "eval_loss");
        int64_t s;
        for (int i = 0; os_json_int(st, 0, INT64_MAX, &s) && cJSON_IsNumber(el) && i < k->nlive; i++)
            if (step[i] == s) loss[i] = el->valuedouble;
        cJSON_Delete(o);
    }
    free(line);
    if (f) fclose(f);
    for (int i = 0; i < k->nlive; i++) consider(k, step[i], loss[i]);
    os_free(step), os_free(loss);
}

static void add_live(os_ckpt_keeper *k, int64_t step) {
    if (is_live(k, step)) return;
    if (k->nlive == k->cap) {
        int64_t *g = os_alloc(sizeof(int64_t) * (size_t)(k->cap = k->cap ? 2 * k->cap : 16), "checkpoint list");
        if (k->nlive) memcpy(g, k->live, sizeof(int64_t) * (size_t)k->nlive);
        os_free(k->live);
        k->live = g;
    }
    int i = k->nlive++;
    for (; i > 0 && k->live[i - 1] > step; i--) k->live[i] = k->live[i - 1];
    k->live[i] = step;
}

void os_ckpt_keeper_init(os_ckpt_keeper *k, const char *output_dir, int64_t limit, const os_ckpt_run *run) {
    *k = (os_ckpt_keeper){.limit = limit, .run = run, .best_step = -1, .eval_step = -1, .best_loss = NAN, .eval_loss = NAN};
    int n;
    ckpt *c = list_checkpoints(output_dir, &n);
    char other[1024] = "";
    size_t m = 0;
    int nother = 0;
    for (int i = 0; i < n; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/checkpoint-%lld", output_dir, (long long)c[i].step);
        os_ckpt_run was;
        if (os_checkpoint_read_run(dir, &was) == 0 && of_lineage(run, was.run_id, c[i].step)) {
            add_live(k, c[i].step);
            continue;
        }
        if (nother++ < 12 && m + 40 < sizeof other)
            m += (size_t)snprintf(other + m, sizeof other - m, "%scheckpoint-%lld", m ? ", " : "", (long long)c[i].step);
    }
    os_free(c);
    if (nother)
        os_info("omnishard sft: %s%s in %s %s not of this run's lineage (an abandoned branch: another run's "
                "checkpoints after the step this run continues from, or an unreadable manifest): --save_total_limit "
                "neither counts nor removes them, --resume_from_checkpoint true never takes them over this run's; a "
                "checkpoint this run saves at the same step replaces one", other, nother > 12 ? " and more" : "",
                output_dir, nother > 1 ? "are" : "is");
    if (limit > 0 && k->nlive) read_eval_losses(k, output_dir);
}

void os_ckpt_keeper_eval(os_ckpt_keeper *k, int64_t step, double eval_loss) {
    k->eval_step = step, k->eval_loss = eval_loss;
    if (is_live(k, step)) consider(k, step, eval_loss);
}

int os_ckpt_keeper_saved(os_ckpt_keeper *k, const char *output_dir, int64_t step) {
    add_live(k, step);
    if (k->eval_step == step) consider(k, step, k->eval_loss);
    if (k->limit <= 0 || k->nlive <= k->limit) return 0;
    int removed = 0, kept = 0;
    int64_t over = k->nlive - k->limit;
    for (int i = 0; i < k->nlive; i++) {
        int64_t s = k->live[i];
        if (i >= over || s == k->best_step) {
            k->live[kept++] = s;
            continue;
        }
        char dir[4200], tmp[4300], why[512];
        snprintf(dir, sizeof dir, "%s/checkpoint-%lld", output_dir, (long long)s);
        snprintf(tmp, sizeof tmp, "%s.tmp", dir);
        int rc = os_runfiles_proven(dir, why, sizeof why) ? 0 : os_errf("omnishard cannot prove it wrote all of it (%s)", why);
        if (rc == 0) rc = os_runfiles_pending(tmp);
        if (rc == 0) rc = os_rm_rf(tmp);
        if (rc == 0 && rename(dir, tmp) != 0) rc = os_errf("%s: cannot rename to %s: %s", dir, tmp, strerror(errno));
        if (rc == 0) rc = os_rm_rf(tmp);
        if (rc == 0) rc = os_runfiles_forget(dir);
        if (rc == 0) rc = os_runfiles_forget(tmp);
        if (rc < 0) os_info("warning: --save_total_limit: %s is kept: %s", dir, os_errmsg());
        else removed++;
        if (rc < 0) k->live[kept++] = s;
    }
    k->nlive = kept;
    return removed;
}

void os_ckpt_keeper_free(os_ckpt_keeper *k) {
    os_free(k->live);
    k->live = NULL, k->nlive = k->cap = 0;
}

// 1 when a was written after b
static int later(const ckpt *a, const ckpt *b) {
    if (a->written.tv_sec != b->written.tv_sec) return a->written.tv_sec > b->written.tv_sec;
    if (a->written.tv_nsec != b->written.tv_nsec) return a->written.tv_nsec > b->written.tv_nsec;
    return a->step > b->step;
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
    int latest = 0;   // the newest written: the live run's latest, never an abandoned branch's higher step
    for (int i = 1; i < count; i++)
        if (later(&c[i], &c[latest])) latest = i;
    if (rc == 1) snprintf(out, n, "%s/checkpoint-%lld", dir, (long long)c[latest].step);
    os_free(c);
    return rc;
}
