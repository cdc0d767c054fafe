// DeepSpeed JSON configs (train/ds_config.h; docs/training.md "DeepSpeed config files").
#include "train/ds_config.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/opts.h"
#include "core/rng.h"
#include "io/atomic.h"
#include "io/json_file.h"
#include "io/json_kind.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *path;
    int argc;
    char **argv;
    os_sft_parallelism_opts *p;   // the sections the file's keys set
    os_sft_training_opts *t;
    os_sft_checkpoint_opts *ck;
    char noeffect[1024], unknown[1024];   // key lists for the notes
} ds_ctx;

// the flag --name (or --name=v, '-' for '_') is on the command line with a value other than "auto" (--torch_dtype
// auto: the model's own precision, which the file's bf16.enabled decides over as over the default)
static int given(const ds_ctx *c, const char *name) {
    for (int i = 1; i < c->argc; i++) {
        const char *s = c->argv[i];
        if (strncmp(s, "--", 2)) continue;
        s += 2;
        size_t k = 0;
        while (name[k] && (s[k] == name[k] || (s[k] == '-' && name[k] == '_'))) k++;
        if (name[k] || (s[k] && s[k] != '=')) continue;
        const char *v = s[k] == '=' ? s + k + 1 : i + 1 < c->argc ? c->argv[i + 1] : "";
        if (strcmp(v, "auto")) return 1;
    }
    return 0;
}

static void list_add(char *list, size_t n, const char *prefix, const char *key) {
    size_t k = strlen(list);
    snprintf(list + k, n - k, "%s%s%s", k ? ", " : "", prefix, key);
}

static int is_auto(const cJSON *v) { return cJSON_IsString(v) && !strcmp(v->valuestring, "auto"); }

// a number key: "auto" keeps the flag; a value sets the flag unless the flag was given, then they must agree
static int number(ds_ctx *c, const cJSON *o, const char *key, const char *flag, double lo, double *dst) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || is_auto(v)) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo)
        return os_errf("%s: \"%s\": expected a number >= %g or \"auto\", got %s", c->path, key, lo, os_json_kind(v));
    if (given(c, flag) && v->valuedouble != *dst)
        return os_errf("%s: \"%s\" is %.9g but --%s is %.9g: DeepSpeed's value and the flag must agree (write \"auto\" "
                       "to take the flag's, or leave the flag out)", c->path, key, v->valuedouble, flag, *dst);
    *dst = v->valuedouble;
    return 0;
}

static int integer(ds_ctx *c, const cJSON *o, const char *key, const char *flag, int64_t *dst) {
    double d = (double)*dst;
    if (number(c, o, key, flag, 1, &d) < 0) return -1;
    if (d != floor(d) || d > 2147483647.0) return os_errf("%s: \"%s\": expected an integer in [1,2147483647], got %.9g", c->path, key, d);
    *dst = (int64_t)d;
    return 0;
}

// a choice the file makes (bf16 on, a schedule): sets the flag's value unless the flag says otherwise
static int choice(ds_ctx *c, const char *key, const char *want, const char *flag, const char **dst) {
    if (given(c, flag) && strcmp(os_opts_canonical_choice(*dst), want))
        return os_errf("%s: %s asks for --%s %s but --%s is %s: DeepSpeed's value and the flag must agree", c->path, key,
                       flag, want, flag, *dst);
    *dst = want;
    return 0;
}

// keys accepted (the listed ones, without effect here) and the rest named as unknown, under prefix
static void rest(ds_ctx *c, const cJSON *o, const char *prefix, const char *const *known, const char *const *noeffect) {
    const cJSON *v;
    cJSON_ArrayForEach(v, o) {
        int k = 0, n = 0;
        while (known[k] && strcmp(known[k], v->string)) k++;
        if (known[k]) continue;
        while (noeffect[n] && strcmp(noeffect[n], v->string)) n++;
        if (noeffect[n]) list_add(c->noeffect, sizeof c->noeffect, prefix, v->string);
        else list_add(c->unknown, sizeof c->unknown, prefix, v->string);
    }
}

static const char *device(const cJSON *o) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "device");
    return cJSON_IsString(d) ? d->valuestring : o ? "(not a string)" : "none";
}

static int zero(ds_ctx *c, const cJSON *z) {
    static const char *const known[] = {"stage", "offload_optimizer", "offload_param", "zero_quantized_weights",
                                        "zero_quantized_gradients", "stage3_gather_16bit_weights_on_model_save",
                                        "gather_16bit_weights_on_model_save", NULL};
    static const char *const noeffect[] = {"overlap_comm", "contiguous_gradients", "reduce_bucket_size",
                                           "allgather_bucket_size", "allgather_partitions", "reduce_scatter",
                                           "sub_group_size", "stage3_prefetch_bucket_size",
                                           "stage3_param_persistence_threshold", "stage3_max_live_parameters",
                                           "stage3_max_reuse_distance", "round_robin_gradients", NULL};
    if (!z) return 0;
    if (!cJSON_IsObject(z)) return os_errf("%s: \"zero_optimization\": expected an object, got %s", c->path, os_json_kind(z));
    double st = c->p->zero_stage;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(z, "stage");
    if (s && (!cJSON_IsNumber(s) || s->valuedouble != floor(s->valuedouble) || s->valuedouble > 3 || s->valuedouble < 0))
        return os_errf("%s: \"zero_optimization.stage\": expected 0, 1, 2 or 3, got %s", c->path, os_json_kind(s));
    if (number(c, z, "stage", "zero_stage", 0, &st) < 0) return -1;
    c->p->zero_stage = (int)st;
    static const char *const offload[] = {"offload_optimizer", "offload_param"};
    for (int i = 0; i < 2; i++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(z, offload[i]);
        if (o && strcmp(device(o), "none"))
            return os_errf("%s: \"zero_optimization.%s.device\" is '%s': offloading is not implemented; omnishard keeps "
                           "parameters, gradients and AdamW state in the backend's memory (the host's with --device "
                           "cpu), so write \"device\": \"none\" or take ms-swift's zero2.json / zero3.json", c->path, offload[i], device(o));
    }
    static const char *const quant[] = {"zero_quantized_weights", "zero_quantized_gradients"};
    for (int i = 0; i < 2; i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(z, quant[i])))
            return os_errf("%s: \"zero_optimization.%s\" true: ZeRO++ quantized communication is not implemented "
                           "(omnishard sends fp32, or bf16 parameters under bf16; docs/zero.md)", c->path, quant[i]);
    static const char *const gather16[] = {"stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save"};
    for (int i = 0; i < 2; i++) {   // false: checkpoints without the consolidated model (true, "auto": the flag's)
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(z, gather16[i]);
        if (g && !cJSON_IsBool(g) && !is_auto(g))
            return os_errf("%s: \"zero_optimization.%s\": expected true, false or \"auto\", got %s", c->path, gather16[i],
                           os_json_kind(g));
        if (!cJSON_IsFalse(g)) continue;
        if (given(c, "save_consolidated") && c->ck->save_consolidated)
            return os_errf("%s: \"zero_optimization.%s\" false asks for --save_consolidated false but "
                           "--save_consolidated is true: DeepSpeed's value and the flag must agree", c->path, gather16[i]);
        c->ck->save_consolidated = 0;
    }
    rest(c, z, "zero_optimization.", known, noeffect);
    return 0;
}

// bf16 / fp16 "enabled": true, false or "auto" (the flag's)
static int precision(ds_ctx *c, const cJSON *root) {
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "bf16"), *f = cJSON_GetObjectItemCaseSensitive(root, "fp16");
    const cJSON *be = cJSON_GetObjectItemCaseSensitive(b, "enabled"), *fe = cJSON_GetObjectItemCaseSensitive(f, "enabled");
    if (cJSON_IsTrue(fe))
        return os_errf("%s: \"fp16.enabled\" true: fp16 mixed precision (with its dynamic loss scaling) is not "
                       "implemented; omnishard trains in fp32 or in bf16 mixed precision (\"bf16\": {\"enabled\": true}, "
                       "or --torch_dtype bfloat16), which needs no loss scaling", c->path);
    if (fe && !cJSON_IsFalse(fe) && !is_auto(fe))
        return os_errf("%s: \"fp16.enabled\": expected true, false or \"auto\", got %s", c->path, os_json_kind(fe));
    if (be && !cJSON_IsBool(be) && !is_auto(be))
        return os_errf("%s: \"bf16.enabled\": expected true, false or \"auto\", got %s", c->path, os_json_kind(be));
    int bf = !strcmp(c->t->torch_dtype, "bfloat16") || !strcmp(c->t->torch_dtype, "bf16");
    if (cJSON_IsTrue(be) && !bf && choice(c, "\"bf16.enabled\" true", "bfloat16", "torch_dtype", &c->t->torch_dtype) < 0) return -1;
    if (cJSON_IsFalse(be) && bf && choice(c, "\"bf16.enabled\" false", "float32", "torch_dtype", &c->t->torch_dtype) < 0) return -1;
    static const char *const fp16_keys[] = {"enabled", "loss_scale", "loss_scale_window", "initial_scale_power",
                                            "hysteresis", "min_loss_scale", "consecutive_hysteresis", "auto_cast", NULL};
    static const char *const none[] = {NULL}, *const en[] = {"enabled", NULL};
    if (cJSON_IsObject(f)) rest(c, f, "fp16.", en, fp16_keys);
    if (cJSON_IsObject(b)) rest(c, b, "bf16.", en, none);
    return 0;
}

// "optimizer": AdamW (or Adam, DeepSpeed's AdamW by default) with "auto" or the flags' values
static int optimizer(ds_ctx *c, const cJSON *o) {
    if (!o) return 0;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type"), *p = cJSON_GetObjectItemCaseSensitive(o, "params");
    if (!cJSON_IsString(t) || (strcmp(t->valuestring, "AdamW") && strcmp(t->valuestring, "Adam")))
        return os_errf("%s: \"optimizer.type\": omnishard's optimizer is AdamW (\"AdamW\" or \"Adam\"), got %s%s%s", c->path,
                       cJSON_IsString(t) ? "'" : "", cJSON_IsString(t) ? t->valuestring : os_json_kind(t), cJSON_IsString(t) ? "'" : "");
    if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(p, "adam_w_mode")))
        return os_errf("%s: \"optimizer.params.adam_w_mode\" false (L2 regularisation in Adam): omnishard's AdamW decouples "
                       "weight decay", c->path);
    os_sft_training_opts *tr = c->t;
    const cJSON *betas = cJSON_GetObjectItemCaseSensitive(p, "betas");
    if (number(c, p, "lr", "learning_rate", 0, &tr->learning_rate) < 0 || number(c, p, "eps", "adam_epsilon", 0, &tr->adam_epsilon) < 0 ||
        number(c, p, "weight_decay", "weight_decay", 0, &tr->weight_decay) < 0)
        return -1;
    if (betas && !is_auto(betas)) {
        if (!cJSON_IsArray(betas) || cJSON_GetArraySize(betas) != 2)
            return os_errf("%s: \"optimizer.params.betas\": expected [beta1, beta2] or \"auto\", got %s", c->path, os_json_kind(betas));
        cJSON *pair = cJSON_CreateObject();
        cJSON_AddItemToObject(pair, "betas[0]", cJSON_Duplicate(cJSON_GetArrayItem(betas, 0), 1));
        cJSON_AddItemToObject(pair, "betas[1]", cJSON_Duplicate(cJSON_GetArrayItem(betas, 1), 1));
        int rc = number(c, pair, "betas[0]", "adam_beta1", 0, &tr->adam_beta1) < 0 || number(c, pair, "betas[1]", "adam_beta2", 0, &tr->adam_beta2) < 0;
        cJSON_Delete(pair);
        if (rc || tr->adam_beta1 >= 1 || tr->adam_beta2 >= 1)
            return rc ? -1 : os_errf("%s: \"optimizer.params.betas\": each in [0,1)", c->path);
    }
    static const char *const known[] = {"lr", "betas", "eps", "weight_decay", "adam_w_mode", NULL},
                             *const noeffect[] = {"torch_adam", NULL}, *const top[] = {"type", "params", NULL}, *const none[] = {NULL};
    if (cJSON_IsObject(p)) rest(c, p, "optimizer.params.", known, noeffect);
    rest(c, o, "optimizer.", top, none);
    return 0;
}

// "scheduler": DeepSpeed's schedule types as --lr_scheduler_type; warm-up and peak from the flags
static int scheduler(ds_ctx *c, const cJSON *s, char *note, size_t n) {
    if (!s) return 0;
    static const char *const ds[] = {"WarmupDecayLR", "WarmupCosineLR", "WarmupLR"}, *const ours[] = {"linear", "cosine",
                                                                                                   "constant_with_warmup"};
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type"), *p = cJSON_GetObjectItemCaseSensitive(s, "params");
    int k = 0;
    while (k < 3 && !(cJSON_IsString(t) && !strcmp(t->valuestring, ds[k]))) k++;
    if (k == 3)
        return os_errf("%s: \"scheduler.type\": expected WarmupDecayLR (linear), WarmupCosineLR (cosine) or WarmupLR "
                       "(constant_with_warmup), got %s", c->path, cJSON_IsString(t) ? t->valuestring : os_json_kind(t));
    if (choice(c, "\"scheduler.type\"", ours[k], "lr_scheduler_type", &c->t->lr_scheduler_type) < 0) return -1;
    double steps = (double)c->t->warmup_steps, peak = c->t->learning_rate;
    if (number(c, p, "warmup_num_steps", "warmup_steps", 0, &steps) < 0 || number(c, p, "warmup_max_lr", "learning_rate", 0, &peak) < 0)
        return -1;
    c->t->warmup_steps = (int64_t)steps, c->t->learning_rate = peak;
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(p, "warmup_min_lr");
    if (mn && !is_auto(mn) && !(cJSON_IsNumber(mn) && mn->valuedouble == 0))
        return os_errf("%s: \"scheduler.params.warmup_min_lr\": omnishard's warm-up starts at 0 (\"auto\" or 0)", c->path);
    const cJSON *wt = cJSON_GetObjectItemCaseSensitive(p, "warmup_type");
    snprintf(note, n, "scheduler %s as --lr_scheduler_type %s with a linear warm-up%s", ds[k], ours[k],
             cJSON_IsString(wt) && !strcmp(wt->valuestring, "linear") ? "" : " (DeepSpeed's default warm-up is logarithmic: "
             "omnishard's is linear, as transformers' schedules)");
    static const char *const known[] = {"total_num_steps", "warmup_num_steps", "warmup_max_lr", "warmup_min_lr", "warmup_type", NULL},
                             *const none[] = {NULL}, *const top[] = {"type", "params", NULL};
    if (cJSON_IsObject(p)) rest(c, p, "scheduler.params.", known, none);
    rest(c, s, "scheduler.", top, none);
    return 0;
}

static int apply(ds_ctx *c, const cJSON *root, char *sched, size_t n) {
    os_sft_training_opts *tr = c->t;
    if (!cJSON_IsObject(root)) return os_errf("%s: expected a JSON object (a DeepSpeed config)", c->path);
    double clip = tr->max_grad_norm, tbs = 0;
    if (integer(c, root, "train_micro_batch_size_per_gpu", "per_device_train_batch_size", &tr->per_device_train_batch_size) < 0 ||
        integer(c, root, "gradient_accumulation_steps", "gradient_accumulation_steps", &tr->gradient_accumulation_steps) < 0 ||
        number(c, root, "gradient_clipping", "max_grad_norm", 0, &clip) < 0 ||
        number(c, root, "train_batch_size", "(none)", 1, &tbs) < 0)
        return -1;
    tr->max_grad_norm = clip, c->p->ds_train_batch_size = (int64_t)tbs;
    if (zero(c, cJSON_GetObjectItemCaseSensitive(root, "zero_optimization")) < 0 || precision(c, root) < 0 ||
        optimizer(c, cJSON_GetObjectItemCaseSensitive(root, "optimizer")) < 0 ||
        scheduler(c, cJSON_GetObjectItemCaseSensitive(root, "scheduler"), sched, n) < 0)
        return -1;
    static const char *const known[] = {"train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping",
                                        "train_batch_size", "zero_optimization", "bf16", "fp16", "optimizer", "scheduler", NULL};
    static const char *const noeffect[] = {"steps_per_print", "wall_clock_breakdown", "zero_allow_untested_optimizer", NULL};
    rest(c, root, "", known, noeffect);
    return 0;
}

int os_ds_config_apply(os_sft_parallelism_opts *p, os_sft_training_opts *t, os_sft_checkpoint_opts *ck, int argc,
                       char **argv) {
    cJSON *root = os_json_config_read(p->deepspeed_file, OS_JSON_CONFIG_MAX, &p->ds_hash);
    if (!root) return os_err_ctx("--deepspeed (a DeepSpeed config file, or zero0..zero3)");
    static ds_ctx c;
    static char notes[3500];
    char sched[256] = "";
    c = (ds_ctx){.path = p->deepspeed_file, .argc = argc, .argv = argv, .p = p, .t = t, .ck = ck};
    int rc = apply(&c, root, sched, sizeof sched);
    cJSON_Delete(root);
    if (rc < 0) return -1;
    char stage[16] = "auto";   // plan's: "auto" without --zero_stage shows every stage
    if (p->zero_stage >= 0) snprintf(stage, sizeof stage, "%d", p->zero_stage);
    int k = snprintf(notes, sizeof notes, "--deepspeed %s: ZeRO stage %s, micro-batch %lld, accumulation %lld, gradient "
                     "clipping %g, %s", p->deepspeed_file, stage, (long long)t->per_device_train_batch_size,
                     (long long)t->gradient_accumulation_steps, t->max_grad_norm, t->torch_dtype);
    if (*sched) k += snprintf(notes + k, sizeof notes - (size_t)k, "; %s", sched);
    if (*c.noeffect && k < (int)sizeof notes)
        k += snprintf(notes + k, sizeof notes - (size_t)k, "; accepted, no effect here (docs/training.md): %s", c.noeffect);
    if (*c.unknown && k < (int)sizeof notes)
        snprintf(notes + k, sizeof notes - (size_t)k, "\nomnishard: WARNING: --deepspeed %s: keys omnishard does not "
                 "know, ignored: %s", p->deepspeed_file, c.unknown);
    p->ds_notes = notes;
    return 0;
}

int os_ds_config_check_batch(const os_sft_parallelism_opts *p, const os_sft_training_opts *t, int world,
                             int64_t global_batch) {
    if (!p->deepspeed_file || p->ds_train_batch_size <= 0 || p->ds_train_batch_size == global_batch) return 0;
    return os_errf("%s: \"train_batch_size\" is %lld but --per_device_train_batch_size %lld x --gradient_accumulation_steps "
                   "%lld x %d rank(s) = %lld: DeepSpeed's value and the flags must agree (write \"auto\")",
                   p->deepspeed_file, (long long)p->ds_train_batch_size, (long long)t->per_device_train_batch_size,
                   (long long)t->gradient_accumulation_steps, world, (long long)global_batch);
}
