// args.json (train/args_json.h).
#include "train/args_json.h"
#include "core/err.h"
#include "core/knobs.h"
#include "core/opts.h"
#include "core/version.h"
#include "io/atomic.h"
#include "io/runfiles.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

// an option's canonical text (os_opts_value) as a JSON value of the option's type: a path or a name stays a string
// even when it reads as a number
static cJSON *value(const os_opt *o, const char *text) {
    if (!strcmp(text, "(not given)") || !strcmp(text, "(none)") || !strcmp(text, "(default)")) return cJSON_CreateNull();
    switch (o->type) {
    case OS_OPT_F64: case OS_OPT_I64: case OS_OPT_INT: case OS_OPT_STAGE: return cJSON_CreateNumber(strtod(text, NULL));
    case OS_OPT_BOOL: case OS_OPT_FLAG: return cJSON_CreateBool(!strcmp(text, "true"));
    default: return cJSON_CreateString(text);
    }
}

static void set(cJSON *o, const char *key, cJSON *v) {
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    cJSON_AddItemToObject(o, key, v);
}

int os_args_json_write(const os_sft_args *a, const os_sft_state *r) {
    const os_omni_config *oc = &r->m->oc;
    cJSON *o = cJSON_CreateObject(), *res = cJSON_CreateObject();
    int nopts;
    const os_opt *opts = os_sft_options(&nopts);
    for (int i = 0; i < nopts; i++) {
        char text[4400];
        os_opts_value(&opts[i], a, text, sizeof text);
        set(o, opts[i].name, value(&opts[i], text));
    }
    float w[OS_MAX_G + 1];
    for (int t = 0; t <= oc->G; t++) w[t] = oc->loss_w[t];
    set(o, "loss_weights", cJSON_CreateFloatArray(w, oc->G + 1));
    set(o, "code_layer", cJSON_CreateNumber(oc->G));
    set(o, "num_latency_tokens", cJSON_CreateNumber(oc->latency));
    set(o, "do_layershift", cJSON_CreateBool(oc->layershift));
    set(o, "head_balance", cJSON_CreateBool(r->trainer.head_balance));   // not given: the backend's default
    cJSON_AddStringToObject(res, "omnishard_version", os_version());
    cJSON_AddStringToObject(res, "git_commit", os_git_commit());
    cJSON_AddNumberToObject(res, "world_size", r->N);
    cJSON_AddNumberToObject(res, "global_batch_size", (double)r->GB);
    cJSON_AddNumberToObject(res, "total_steps", (double)r->total);
    cJSON_AddNumberToObject(res, "warmup_steps", (double)r->warmup);
    cJSON_AddNumberToObject(res, "train_samples", (double)r->nsamp);
    cJSON_AddNumberToObject(res, "eval_samples", r->ev ? (double)r->ev->n : 0.0);
    if (a->checkpoint.resume_from_checkpoint) cJSON_AddStringToObject(res, "resumed_from", a->checkpoint.resume_from_checkpoint);
    else cJSON_AddNullToObject(res, "resumed_from");
    cJSON_AddNumberToObject(res, "resumed_at_step", (double)r->done);
    cJSON *env = cJSON_CreateObject();   // the OMNISHARD_* variables set (core/knobs.h)
    for (int i = 0; i < os_knobs_count(); i++) {
        const char *name, *v = os_knobs_entry(i, &name);
        if (v) cJSON_AddStringToObject(env, name, v);
    }
    cJSON_AddItemToObject(res, "environment", env);
    cJSON_AddItemToObject(o, "resolved", res);
    char *text = cJSON_Print(o), path[4300];
    cJSON_Delete(o);
    if (!text) return os_errf("args.json: out of memory");
    snprintf(path, sizeof path, "%s/args.json", a->checkpoint.output_dir);
    size_t n = strlen(text);
    text[n++] = '\n';   // cJSON_Print's text ends at "}"; its NUL becomes the newline
    int rc = os_write_file_atomic(path, text, n);
    if (rc == 0) rc = os_runfiles_record(path);
    free(text);
    return rc;
}
