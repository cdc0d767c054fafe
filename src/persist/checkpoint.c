#include "persist/checkpoint.h"
#include "persist/checkpoint_files.h"
#include "persist/export.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "io/atomic.h"
#include "io/runfiles.h"
#include "io/json_kind.h"
#include "io/safetensors.h"
#include "zero/comm.h"
#include "zero/shards.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FORMAT "omnishard-checkpoint-2"

// size and FNV-1a-64 of a file, read in pieces (a rank file is the rank's whole model state: never all in memory)
static cJSON *int_array(const int64_t *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static void add_run(cJSON *o, const os_ckpt_run *run) {
    cJSON *d = cJSON_AddObjectToObject(o, "data");
    cJSON_AddNumberToObject(d, "epoch", (double)run->next.epoch);
    cJSON_AddNumberToObject(d, "position", (double)run->next.pos);
    cJSON_AddNumberToObject(d, "samples_seen", (double)run->samples_seen);
    cJSON_AddNumberToObject(d, "global_batch", (double)run->global_batch);
    cJSON_AddNumberToObject(d, "samples", (double)run->samples);
    cJSON_AddStringToObject(d, "dataset", run->dataset);
    cJSON_AddStringToObject(o, "run_id", run->run_id);
    cJSON_AddStringToObject(o, "lineage", run->lineage);
    cJSON *r = cJSON_AddObjectToObject(o, "run");
    for (int i = 0; i < run->n; i++) cJSON_AddStringToObject(r, run->key[i], run->val[i]);
}

static cJSON *manifest(const os_model *m, const zr_runtime *rt, const os_ckpt_dest *a, int64_t step, int with_optim,
                       const int64_t *bytes, const uint64_t *sums, const os_ckpt_run *run) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", FORMAT);
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddNumberToObject(o, "world_size", rt->nranks);
    cJSON_AddNumberToObject(o, "zero_stage", rt->stage);
    cJSON_AddNumberToObject(o, "seed", (double)a->seed);
    cJSON_AddBoolToObject(o, "optimizer_state", with_optim);
    cJSON_AddStringToObject(o, "model", a->model_dir);
    cJSON_AddStringToObject(o, "dataset", run->dataset);
    cJSON *bk = cJSON_AddArrayToObject(o, "buckets");
    int nb = os_model_own_buckets(m), np = nb < m->reg.nb ? m->reg.b[nb].first : m->reg.np;
    for (int b = 0; b < nb; b++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", m->reg.b[b].name);
        cJSON_AddNumberToObject(e, "numel", (double)m->reg.b[b].numel);
        cJSON_AddNumberToObject(e, "slice", (double)rt->bk[b].slice);
        cJSON_AddItemToArray(bk, e);
    }
    cJSON *ps = cJSON_AddArrayToObject(o, "parameters");
    for (int i = 0; i < np; i++) {
        const os_param *p = &m->reg.p[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", p->name);
        cJSON_AddItemToObject(e, "shape", int_array(p->shape, p->ndim));
        cJSON_AddItemToArray(ps, e);
    }
    add_run(o, run);
    cJSON *fs = cJSON_AddArrayToObject(o, "files");
    for (int r = 0; r < rt->nranks; r++) {
        char nm[64], cs[32];
        snprintf(nm, sizeof nm, "rank-%05d.safetensors", r);
        snprintf(cs, sizeof cs, "%016llx", (unsigned long long)sums[r]);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", nm);
        cJSON_AddNumberToObject(e, "bytes", (double)bytes[r]);
        cJSON_AddStringToObject(e, "fnv1a64", cs);
        cJSON_AddItemToArray(fs, e);
    }
    return o;
}

#define SUM_KEY "\"manifest_fnv1a64\""

// the manifest's text with its checksum as the last member (cJSON_Print ends the object with "\n}")
static int write_manifest(const char *path, cJSON *o) {
    char *text = cJSON_Print(o), tail[96];
    size_t n = strlen(text) - 2;
    int k = snprintf(tail, sizeof tail, ",\n\t" SUM_KEY ":\t\"%016llx\"\n}\n", (unsigned long long)os_fnv1a(OS_FNV_BASIS, text, n));
    char *all = os_alloc(n + (size_t)k, "manifest");
    memcpy(all, text, n), memcpy(all + n, tail, (size_t)k);
    int rc = os_write_file_atomic(path, all, n + (size_t)k);
    os_free(all);
    cJSON_free(text);
    return rc;
}

// DIR/manifest.json parsed, after checking its checksum; NULL + message naming the file
static cJSON *read_manifest(const char *dir) {
    char path[4400];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    size_t n;
    char *text = os_read_file(path, &n);
    if (!text) return NULL;
    cJSON *o = cJSON_ParseWithLength(text, n);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format"), *sum = cJSON_GetObjectItemCaseSensitive(o, "manifest_fnv1a64");
    char *at = NULL;
    for (char *p = strstr(text, SUM_KEY); p; p = strstr(p + 1, SUM_KEY)) at = p;
    while (at && at > text && at[-1] != ',') at--;
    char have[32];
    snprintf(have, sizeof have, "%016llx", at && at > text ? (unsigned long long)os_fnv1a(OS_FNV_BASIS, text, (size_t)(at - 1 - text)) : 0ULL);
    int rc = 0;
    if (!o) rc = os_errf("%s: not valid JSON (corrupt manifest)", path);
    else if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT))
        rc = os_errf("%s: field 'format': expected \"%s\", got %s%s%s (checkpoints of older omnishard versions cannot "
                     "be read)", path, FORMAT, cJSON_IsString(fmt) ? "\"" : "", cJSON_IsString(fmt) ? fmt->valuestring : "none",
                     cJSON_IsString(fmt) ? "\"" : "");
    else if (!cJSON_IsString(sum) || !at || at == text || strcmp(sum->valuestring, have))
        rc = os_errf("%s: checksum %s of the contents does not match manifest_fnv1a64 %s (corrupt manifest)", path, have,
                     cJSON_IsString(sum) ? sum->valuestring : "(missing)");
    os_free(text);
    if (rc == 0) return o;
    cJSON_Delete(o);
    return NULL;
}

int os_checkpoint_save(const os_model *m, zr_runtime *rt, const os_ckpt_dest *a, int64_t step, const os_ckpt_run *run) {
    int root = rt->rank == 0, rc = 0, with_optim = !a->save_only_model;
    char dir[4200], tmp[4300], path[8400];
    snprintf(dir, sizeof dir, "%s/checkpoint-%lld", a->output_dir, (long long)step);
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    if (root) {
        rc = os_runfiles_pending(tmp);   // the run's manifest (io/runfiles.h) proves a leftover temporary its own
        if (rc == 0) os_rm_rf(tmp);
        if (rc == 0) rc = os_mkdir_p(tmp);
    }
    if (comm_any_failed(rc < 0)) return root ? -1 : os_err_echo("%s: rank 0 could not create the directory", tmp);
    snprintf(path, sizeof path, "%s/rank-%05d.safetensors", tmp, rt->rank);
    int64_t mine[2] = {0, 0};
    const char *meta[] = {"format", FORMAT, NULL};
    rc = zr_shards_write(rt, os_model_own_buckets(m), path, with_optim, meta);   // not the frozen speech encoder
    if (rc == 0) rc = os_file_checksum(path, &mine[0], (uint64_t *)&mine[1]);
    int failed = comm_any_failed(rc < 0);
    int64_t *all = os_alloc(sizeof(int64_t) * 2 * (size_t)rt->nranks, "checkpoint sums");
    comm_allgather_bytes(mine, all, sizeof mine);
    if (root && !failed) {
        rc = os_copy_model_files(a->model_dir, tmp, 1);
        snprintf(path, sizeof path, "%s/slam_omni.json", tmp);   // the sizes in use (speech projector included)
        if (rc == 0 && (m->oc.G > 0 || m->oc.lora.rank > 0)) rc = os_omni_config_write(path, &m->oc);   // + LoRA
    }
    failed = comm_any_failed(rc < 0 || failed);
    if (!failed && a->consolidated) {   // collective: one bucket gathered at a time
        os_export_opts eo = a->exp;
        eo.into = 1, eo.merge_lora = 0, eo.final_dir = dir, eo.adapter_at_top = 1;   // ms-swift's layout
        failed = os_export(m, rt, a->model_dir, tmp, &eo) < 0;
        if (failed && root) rc = -1;
    }
    if (root && !failed) {
        int64_t *bytes = os_alloc(sizeof(int64_t) * (size_t)rt->nranks, "sizes");
        uint64_t *sums = os_alloc(sizeof(uint64_t) * (size_t)rt->nranks, "sums");
        for (int r = 0; r < rt->nranks; r++) bytes[r] = all[2 * r], sums[r] = (uint64_t)all[2 * r + 1];
        cJSON *o = manifest(m, rt, a, step, with_optim, bytes, sums, run);   // last: it covers every file
        rc = os_ckpt_files_record(o, tmp);
        snprintf(path, sizeof path, "%s/manifest.json", tmp);
        if (rc == 0) rc = write_manifest(path, o);
        cJSON_Delete(o);
        os_free(bytes), os_free(sums);
        if (rc == 0) rc = os_runfiles_may_replace(dir);   // never a checkpoint-N omnishard did not write
        if (rc == 0) rc = os_rename_dir_atomic(tmp, dir);
        if (rc == 0) rc = os_runfiles_record(dir);
        if (rc == 0) rc = os_runfiles_forget(tmp);
    }
    os_free(all);
    failed = comm_any_failed(rc < 0 || failed);
    if (failed) {
        if (rc == 0) os_err_echo("%s: checkpoint not written (another rank failed)", dir);
        else os_err_ctx("checkpoint %s", dir);
        if (root) os_rm_rf(tmp);
        return -1;
    }
    return 0;
}

void os_checkpoint_cleanup(const char *output_dir) {
    DIR *d = opendir(output_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (!strncmp(e->d_name, "checkpoint-", 11) && n > 4 && !strcmp(e->d_name + n - 4, ".tmp")) {
            char p[4400], why[512];
            snprintf(p, sizeof p, "%s/%s", output_dir, e->d_name);
            if (!os_runfiles_proven(p, why, sizeof why)) os_info("omnishard sft: kept %s (%s)", p, why);
            else if (os_runfiles_remove(p) == 0) os_info("omnishard sft: removed %s (left by a killed save)", p);
            else os_info("omnishard sft: WARNING: could not remove %s: %s", p, os_errmsg());
        }
    }
    closedir(d);
    char fm[4200];   // final_model.tmp.PID of a killed run (the output directory is locked: no other run writes it)
    snprintf(fm, sizeof fm, "%s/final_model", output_dir);
    os_export_cleanup(fm, 0);
}

// ---- load ----
typedef struct {
    const char *dir;
    int world;
    int64_t *slice;        // per bucket, in the checkpoint's layout
    os_st_file **files;    // opened on demand
    cJSON *man;
} ckpt_in;

static os_st_file *rank_file(void *ctx, int r) {
    ckpt_in *c = ctx;
    if (c->files[r]) return c->files[r];
    const cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c->man, "files"), r);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name"), *by = cJSON_GetObjectItemCaseSensitive(f, "bytes"),
                *cs = cJSON_GetObjectItemCaseSensitive(f, "fnv1a64");
    int64_t want_bytes;
    if (!cJSON_IsString(nm) || !os_json_int(by, 0, INT64_MAX, &want_bytes) || !cJSON_IsString(cs)) {
        os_errf("%s/manifest.json: files[%d]: expected name, bytes and fnv1a64", c->dir, r);
        return NULL;
    }
    char path[4400], want[32];
    snprintf(path, sizeof path, "%s/%s", c->dir, nm->valuestring);
    int64_t bytes;
    uint64_t sum;
    if (os_file_checksum(path, &bytes, &sum) < 0) return NULL;
    snprintf(want, sizeof want, "%016llx", (unsigned long long)sum);
    if (bytes != want_bytes || strcmp(want, cs->valuestring)) {
        os_errf("%s: size %lld / checksum %s do not match the manifest's %lld / %s (corrupt or incomplete checkpoint)",
                path, (long long)bytes, want, (long long)want_bytes, cs->valuestring);
        return NULL;
    }
    return c->files[r] = os_st_open(path);
}

static int parse_manifest(ckpt_in *c, const os_registry *reg, int nb, int64_t *step, int *optim) {
    char path[4400];
    snprintf(path, sizeof path, "%s/manifest.json", c->dir);
    if (!(c->man = read_manifest(c->dir)) || os_ckpt_files_verify(c->man, c->dir) < 0) return -1;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(c->man, "step"), *ws = cJSON_GetObjectItemCaseSensitive(c->man, "world_size");
    const cJSON *bk = cJSON_GetObjectItemCaseSensitive(c->man, "buckets"), *fs = cJSON_GetObjectItemCaseSensitive(c->man, "files");
    int64_t world;
    if (!os_json_int(st, 0, INT64_MAX, step) || !os_json_int(ws, 1, INT32_MAX, &world) || !cJSON_IsArray(bk) ||
        !cJSON_IsArray(fs) || cJSON_GetArraySize(fs) != world)
        return os_errf("%s: expected step, world_size, buckets and one file per rank", path);
    c->world = (int)world;
    *optim = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c->man, "optimizer_state"));
    if (cJSON_GetArraySize(bk) != nb)
        return os_errf("%s: %d buckets, the model has %d (a checkpoint of another model?)", path, cJSON_GetArraySize(bk), nb);
    c->slice = os_alloc(sizeof(int64_t) * (size_t)reg->nb, "checkpoint slices");
    c->files = os_alloc(sizeof(os_st_file *) * (size_t)c->world, "checkpoint files");
    for (int b = 0; b < nb; b++) {
        const cJSON *e = cJSON_GetArrayItem(bk, b);
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name"), *ne = cJSON_GetObjectItemCaseSensitive(e, "numel"),
                    *sl = cJSON_GetObjectItemCaseSensitive(e, "slice");
        int64_t numel;
        if (!cJSON_IsString(nm) || !os_json_int(ne, 0, INT64_MAX, &numel) ||
            !os_json_int(sl, 1, INT64_MAX / world, &c->slice[b]) || c->slice[b] * world < numel)
            return os_errf("%s: buckets[%d]: expected name, numel, and a slice >= 1 whose world_size slices cover numel",
                           path, b);
        if (strcmp(nm->valuestring, reg->b[b].name) || numel != reg->b[b].numel)
            return os_errf("%s: bucket %d is '%s' with %lld values, the model has '%s' with %lld", path, b, nm->valuestring,
                           (long long)numel, reg->b[b].name, (long long)reg->b[b].numel);
    }
    return 0;
}

static int load(const os_model *m, zr_runtime *rt, const char *dir, int64_t *step, int moments) {
    ckpt_in c = {.dir = dir};
    const os_registry *reg = &m->reg;
    int nb = os_model_own_buckets(m), optim = 0, rc = parse_manifest(&c, reg, nb, step, &optim);
    optim = optim && moments;
    zr_shard_source src = {c.world, c.slice, rank_file, &c, dir};
    if (rc == 0) rc = zr_shards_read(rt, nb, &src, optim);   // the speech encoder's buckets come from --speech_encoder
    for (int r = 0; c.files && r < c.world; r++) os_st_close(c.files[r]);
    os_free(c.files), os_free(c.slice);
    cJSON_Delete(c.man);
    int failed = comm_any_failed(rc < 0);
    if (failed && rc == 0) return os_err_echo("%s: another rank could not read the checkpoint", dir);
    return failed ? -1 : 0;
}

int os_checkpoint_load(const os_model *m, zr_runtime *rt, const char *dir, int64_t *step) { return load(m, rt, dir, step, 1); }

int os_checkpoint_load_params(const os_model *m, zr_runtime *rt, const char *dir, int64_t *step) {
    return load(m, rt, dir, step, 0);
}

int os_checkpoint_verify_files(const char *dir) {
    cJSON *o = read_manifest(dir);
    int rc = o ? os_ckpt_files_verify(o, dir) : -1;
    cJSON_Delete(o);
    return rc;
}

// ---- the run record ----
static int64_t int_field(const cJSON *o, const char *k, int *ok) {
    int64_t v = 0;
    if (!os_json_int(cJSON_GetObjectItemCaseSensitive(o, k), 0, INT64_MAX, &v)) *ok = 0;
    return v;
}

int os_checkpoint_read_run(const char *dir, os_ckpt_run *run) {
    memset(run, 0, sizeof *run);
    cJSON *o = read_manifest(dir);
    if (!o) return -1;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "data"), *r = cJSON_GetObjectItemCaseSensitive(o, "run"),
                *ds = cJSON_GetObjectItemCaseSensitive(d, "dataset"), *e;
    int ok = cJSON_IsObject(d) && cJSON_IsObject(r) && cJSON_IsString(ds);
    run->step = int_field(o, "step", &ok);
    run->next.epoch = int_field(d, "epoch", &ok), run->next.pos = int_field(d, "position", &ok);
    run->samples_seen = int_field(d, "samples_seen", &ok), run->global_batch = int_field(d, "global_batch", &ok);
    run->samples = int_field(d, "samples", &ok);
    run->optimizer_state = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "optimizer_state"));
    if (ok) snprintf(run->dataset, sizeof run->dataset, "%s", ds->valuestring);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "run_id"), *li = cJSON_GetObjectItemCaseSensitive(o, "lineage");
    snprintf(run->run_id, sizeof run->run_id, "%s", cJSON_IsString(id) && *id->valuestring ? id->valuestring : "-");
    snprintf(run->lineage, sizeof run->lineage, "%s", cJSON_IsString(li) ? li->valuestring : "");
    const cJSON *keys = cJSON_IsObject(r) ? r : NULL;   // an array's items have no names
    cJSON_ArrayForEach(e, keys) {
        if (!cJSON_IsString(e) || run->n == OS_RUN_KEYS) ok = 0;
        else {
            snprintf(run->key[run->n], sizeof run->key[0], "%s", e->string);
            snprintf(run->val[run->n++], sizeof run->val[0], "%s", e->valuestring);
        }
    }
    cJSON_Delete(o);
    if (!ok) return os_errf("%s/manifest.json: fields 'data' (epoch, position, samples_seen, global_batch, samples, "
                            "dataset) and 'run' (strings): missing or malformed", dir);
    return 0;
}

int os_checkpoint_check_run(const char *dir, const os_ckpt_run *saved, const os_ckpt_run *now, int override) {
    char all[12000];   // every difference, in one message
    size_t k = 0;
    for (int i = 0; i < now->n; i++) {
        const char *was = "(not recorded)";
        for (int j = 0; j < saved->n; j++)
            if (!strcmp(saved->key[j], now->key[i])) was = saved->val[j];
        if (!strcmp(was, now->val[i])) continue;
        char what[8500];
        if (!strcmp(now->key[i], "--dataset"))
            snprintf(what, sizeof what, "--dataset: %s was trained on %s (%s), this run reads %s (%s)", dir, saved->dataset,
                     was, now->dataset, now->val[i]);
        else snprintf(what, sizeof what, "%s: %s was trained with %s, this run has %s", now->key[i], dir, was, now->val[i]);
        if (override) os_info("omnishard: WARNING: resume with another setting (--resume_override_config true): %s", what);
        else if (k < sizeof all) k += (size_t)snprintf(all + k, sizeof all - k, "%s%s", k ? "; " : "", what);
    }
    if (k)
        return os_errf("resume: %s (a resumed run must continue the same run; --resume_override_config true "
                       "continues anyway)", all);
    return 0;
}
