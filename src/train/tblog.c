// logging.jsonl lines -> TensorBoard scalars (train/tblog.h).
#include "train/tblog.h"
#include "core/err.h"
#include <cjson/cJSON.h>
#include <string.h>
#include <time.h>

void os_tblog_tag(const char *k, char *buf, size_t n) {
    if (!strncmp(k, "eval_", 5)) snprintf(buf, n, "eval/%s", k + 5);
    else snprintf(buf, n, "train/%s", k);
}

int os_tblog_line(os_tfevents *w, const char *line, size_t n) {
    cJSON *o = cJSON_ParseWithLength(line, n);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "step"), *v;
    if (!cJSON_IsNumber(st)) {
        cJSON_Delete(o);
        return os_errf("%s: a logging.jsonl line without its step (not written to TensorBoard)", w->path);
    }
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    double wall = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
    int rc = 0;
    cJSON_ArrayForEach(v, o) {
        if (rc < 0) break;
        if (!cJSON_IsNumber(v) || !strcmp(v->string, "step")) continue;
        char tag[256];
        os_tblog_tag(v->string, tag, sizeof tag);
        rc = os_tfevents_scalar(w, (int64_t)st->valuedouble, wall, tag, v->valuedouble);
    }
    cJSON_Delete(o);
    return rc;
}
