#include "persist/export.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/atomic.h"
#include "io/runfiles.h"
#include "io/hfconfig.h"
#include "io/safetensors.h"
#include "kernels/ops.h"
#include "zero/comm.h"
#include "zero/stage.h"
#include <stdio.h>
#include <string.h>
#include <limits.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>
#include <cjson/cJSON.h>

int os_is_lora_param(const char *name) { return strstr(name, ".lora_A.") || strstr(name, ".lora_B."); }

int os_is_slam_param(const char *name) {
    return !strncmp(name, "group_decode_adapter.", 21) || !strncmp(name, "encoder_projector.", 18);
}

// the first two are written by export itself
static const char *model_files[] = {"config.json", "slam_omni.json", "tokenizer.json", "tokenizer_config.json", "vocab.json",
                                    "merges.txt", "special_tokens_map.json", "generation_config.json", "added_tokens.json"};

int os_copy_model_files(const char *src_dir, const char *dst_dir, int with_configs) {
    for (size_t k = with_configs ? 0 : 2; k < sizeof model_files / sizeof model_files[0]; k++) {
        char src[4200], dst[4200];
        snprintf(src, sizeof src, "%s/%s", src_dir, model_files[k]);
        snprintf(dst, sizeof dst, "%s/%s", dst_dir, model_files[k]);
        if (access(src, R_OK)) continue;
        size_t n;
        char *d = os_read_file(src, &n);
        int rc = d ? os_write_file_atomic(dst, d, n) : -1;
        os_free(d);
        if (rc < 0) return -1;
    }
    return 0;
}

// the frozen speech encoder is not part of the exported model (it stays in its own --speech_encoder directory)
static int exported(const os_model *m, int b) { return b < os_model_own_buckets(m); }

// The files of an export: model shards 0..nshard-1, then slam_omni.safetensors, then the PEFT adapter file;
// dest[i]: the file parameter i goes to (-1: none)
typedef struct {
    int nshard, *dest;
    os_st_writer **w;
    int64_t total_bytes;   // model.safetensors' tensors (the index's metadata.total_size)
} out_files;

static int slam_file(const out_files *f) { return f->nshard; }
static int adapter_file(const out_files *f) { return f->nshard + 1; }

// which file each parameter goes to: a LoRA one to the adapter, a SLAM-Omni one to slam_omni.safetensors, the LLM's
// to a model shard (a new shard when the next tensor would take the current one past max bytes, as transformers)
static void plan_files(const os_model *m, int esz, int64_t max, out_files *f) {
    const os_registry *r = &m->reg;
    int64_t cur = 0;
    f->dest = os_alloc(sizeof(int) * (size_t)r->np, "export files");
    f->nshard = 0;
    for (int i = 0; i < r->np; i++) {
        f->dest[i] = -1;
        if (!exported(m, r->p[i].bucket) || os_is_lora_param(r->p[i].name) || os_is_slam_param(r->p[i].name)) continue;
        int64_t bytes = r->p[i].numel * esz;
        if (f->nshard == 0 || (cur > 0 && cur + bytes > max)) f->nshard++, cur = 0;
        cur += bytes, f->total_bytes += bytes;
        f->dest[i] = f->nshard - 1;
    }
    for (int i = 0; i < r->np; i++)
        if (exported(m, r->p[i].bucket) && f->dest[i] < 0) f->dest[i] = f->nshard + !os_is_slam_param(r->p[i].name);
    f->w = os_alloc(sizeof(os_st_writer *) * (size_t)(f->nshard + 2), "export writers");
}

static void shard_name(const out_files *f, int k, char *buf, size_t n) {
    if (f->nshard == 1) snprintf(buf, n, "model.safetensors");
    else snprintf(buf, n, "model-%05d-of-%05d.safetensors", k + 1, f->nshard);
}

// open a writer for the parameters of file k; NULL writer when there are none. The adapter file names its tensors
// as PEFT saves them: "base_model.model." + name.
static int open_writer(const os_model *m, const out_files *f, const char *path, int k, int dtype) {
    const os_registry *r = &m->reg;
    int n = 0;
    const char **names = os_alloc(sizeof(char *) * (size_t)r->np, "export names");
    char(*peft)[136] = os_alloc(sizeof(char[136]) * (size_t)r->np, "export names");
    int *nd = os_alloc(sizeof(int) * (size_t)r->np, "export ndims");
    int64_t(*sh)[8] = os_alloc(sizeof(int64_t[8]) * (size_t)r->np, "export shapes");
    for (int i = 0; i < r->np; i++) {
        if (f->dest[i] != k) continue;
        snprintf(peft[n], sizeof peft[n], "base_model.model.%s", r->p[i].name);
        names[n] = k == adapter_file(f) ? peft[n] : r->p[i].name, nd[n] = r->p[i].ndim;
        memcpy(sh[n], r->p[i].shape, sizeof(int64_t) * 4);
        n++;
    }
    const char *meta[] = {"format", "pt", NULL};
    f->w[k] = n ? os_st_writer_begin_as(path, dtype, n, names, nd, (const int64_t(*)[8])sh, meta) : NULL;
    os_free(names), os_free(peft), os_free(nd), os_free(sh);
    return n && !f->w[k] ? -1 : 0;
}

// model.safetensors.index.json of a sharded model, as transformers writes it
static int write_index(const os_model *m, const out_files *f, const char *dir) {
    cJSON *o = cJSON_CreateObject(), *map = cJSON_CreateObject();
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "metadata"), "total_size", (double)f->total_bytes);
    for (int i = 0; i < m->reg.np; i++) {
        char nm[64];
        if (f->dest[i] < 0 || f->dest[i] >= f->nshard) continue;
        shard_name(f, f->dest[i], nm, sizeof nm);
        cJSON_AddStringToObject(map, m->reg.p[i].name, nm);
    }
    cJSON_AddItemToObject(o, "weight_map", map);
    char *text = cJSON_Print(o), path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    int rc = text ? os_write_file_atomic(path, text, strlen(text)) : os_errf("%s: out of memory", path);
    cJSON_free(text);
    cJSON_Delete(o);
    return rc;
}

// every writer of the export opened in dir (rank 0)
static int open_files(const os_model *m, out_files *f, const char *dir, int dtype, int adapter, const char *ad) {
    char path[4200], nm[64];
    int rc = 0;
    for (int k = 0; rc == 0 && k < f->nshard; k++) {
        shard_name(f, k, nm, sizeof nm);
        snprintf(path, sizeof path, "%s/%s", dir, nm);
        rc = open_writer(m, f, path, k, dtype);
    }
    snprintf(path, sizeof path, "%s/slam_omni.safetensors", dir);
    if (rc == 0 && m->oc.G > 0) rc = open_writer(m, f, path, slam_file(f), dtype);
    snprintf(path, sizeof path, "%s%s", dir, ad);
    if (rc == 0 && adapter) rc = os_mkdir_p(path);
    snprintf(path, sizeof path, "%s%s/adapter_model.safetensors", dir, ad);
    if (rc == 0 && adapter) rc = open_writer(m, f, path, adapter_file(f), dtype);
    return rc;
}

// finish (rc 0) or abort every writer
static int close_files(out_files *f, int rc) {
    for (int k = 0; f->w && k < f->nshard + 2; k++) {
        if (rc == 0 && f->w[k]) rc = os_st_writer_finish(f->w[k]), f->w[k] = NULL;
        os_st_writer_abort(f->w[k]);
    }
    os_free(f->w);
    f->w = NULL;
    return rc;
}

// PEFT's adapter_config.json for the model's LoRA (base: the directory the adapter belongs to)
static int write_adapter_config(const os_model *m, const char *path, const char *base) {
    const os_lora_config *lc = &m->oc.lora;
    char buf[2048], mods[160] = "", al[32], dr[32];
    for (int t = 0, k = 0; t < OS_LORA_N; t++)
        if (lc->targets >> t & 1) k += snprintf(mods + k, sizeof mods - (size_t)k, "%s\"%s\"", k ? ", " : "", os_lora_module[t]);
    int n = snprintf(buf, sizeof buf,
                     "{\n  \"peft_type\": \"LORA\",\n  \"task_type\": \"CAUSAL_LM\",\n  \"base_model_name_or_path\": \"%s\",\n"
                     "  \"r\": %d,\n  \"lora_alpha\": %s,\n  \"lora_dropout\": %s,\n  \"target_modules\": [%s],\n"
                     "  \"bias\": \"none\",\n  \"fan_in_fan_out\": false,\n  \"use_rslora\": false,\n  \"inference_mode\": true\n}\n",
                     base, lc->rank, os_float_str(lc->alpha, al, sizeof al), os_float_str(lc->dropout, dr, sizeof dr), mods);
    return os_write_file_atomic(path, buf, (size_t)n);
}

// dst[O, I] = W + (alpha / r) * B @ A for LoRA module t of layer l (its LoRA bucket gathered; all on the backend)
static void merge_into(const os_model *m, zr_runtime *rt, int64_t l, int t, const float *W, float *dst) {
    int64_t O, I, r = m->oc.lora.rank;
    os_lora_base(m, l, t, &O, &I);
    os_k->copy(dst, W, O * I);
    os_k->matmul(os_matf(dst, O, I, I), os_matf(zr_param(rt, m->layer[l].lora_b[t]), O, r, r),
                 os_matf(zr_param(rt, m->layer[l].lora_a[t]), r, I, I), m->oc.lora.alpha / (float)r, 1.0f,
                 os_tensor_none(), os_tensor_none());
}

// the layer whose bucket b is, or -1
static int64_t layer_of(const os_model *m, int b) {
    for (int64_t l = 0; l < m->nlayers; l++)
        if (m->b_layer[l] == b) return l;
    return -1;
}

// rank 0's writes of bucket b (gathered as `full`, on the backend): every parameter into its file (from the
// backend a piece at a time), LoRA targets merged
static int put_bucket(const os_model *m, zr_runtime *rt, int b, const float *full, const out_files *f, int merge) {
    const os_registry *r = &m->reg;
    int64_t l = merge && m->b_lora ? layer_of(m, b) : -1;
    zr_stage st = {0};
    int rc = 0;
    for (int i = r->b[b].first; rc == 0 && i < r->b[b].first + r->b[b].count; i++) {
        const float *src = full + rt->reg->p[i].offset;   // where the runtime placed it
        float *tmp = NULL;
        for (int t = 0; l >= 0 && t < OS_LORA_N; t++) {
            int64_t O, I;
            if (m->layer[l].lora_a[t] >= 0 && os_lora_base(m, l, t, &O, &I) == i) {
                tmp = os_k->alloc_uninit((int64_t)sizeof(float) * r->p[i].numel, "merged LoRA weight");
                merge_into(m, rt, l, t, src, tmp);
                src = tmp;
            }
        }
        os_st_writer *wr = f->dest[i] >= 0 ? f->w[f->dest[i]] : NULL;
        rc = wr ? zr_stage_put(&st, wr, src, r->p[i].numel) : 0;
        os_k->free(tmp);
    }
    zr_stage_free(&st);
    return rc < 0 ? -1 : 0;
}

int os_export(const os_model *m, zr_runtime *rt, const char *src_dir, const char *out_dir, const os_export_opts *o) {
    int root = comm_rank() == 0, rc = 0, lora = m->b_lora != NULL, merge = lora && o->merge_lora;
    char tmp[4096], path[4200], src[4200], base[PATH_MAX];
    const char *ad = o->adapter_at_top ? "" : "/lora_adapter";   // the adapter's directory under OUT
    snprintf(tmp, sizeof tmp, o->into ? "%s" : "%s.tmp.%d", out_dir, (int)getpid());
    out_files f = {0};
    if (root) {
        if (!o->into) os_rm_rf(tmp), rc = os_mkdir_p(tmp);
        plan_files(m, os_st_dtype_size(o->dtype), o->max_shard_bytes > 0 ? o->max_shard_bytes : OS_SHARD_DEFAULT, &f);
        if (rc == 0) rc = open_files(m, &f, tmp, o->dtype, lora && !merge, ad);
    }
    const os_registry *r = &m->reg;
    for (int b = 0; b < r->nb; b++) {   // every rank takes part in the gathers, whatever rank 0's state
        if (!exported(m, b) || (merge && layer_of(m, b) < 0 && os_is_lora_param(r->p[r->b[b].first].name)))
            continue;   // merged: LoRA buckets are read with their layer
        int64_t l = merge ? layer_of(m, b) : -1;
        float *full = zr_gather(rt, b);
        if (l >= 0) zr_gather(rt, m->b_lora[l]);
        if (root && rc == 0) rc = put_bucket(m, rt, b, full, &f, merge);
        if (l >= 0) zr_release(rt, m->b_lora[l]);
        zr_release(rt, b);
    }
    if (root) {
        rc = close_files(&f, rc);
        if (rc == 0 && f.nshard > 1) rc = write_index(m, &f, tmp);
        os_free(f.dest);
        snprintf(src, sizeof src, "%s/config.json", src_dir);
        snprintf(path, sizeof path, "%s/config.json", tmp);
        if (rc == 0) rc = os_qwen2_config_rewrite(src, path, (int)m->V, os_export_dtype_name(o->dtype));
        snprintf(path, sizeof path, "%s/slam_omni.json", tmp);
        os_omni_config oc = m->oc;
        oc.lora.rank = 0;   // merged or base + adapter: the exported model itself has no LoRA
        if (rc == 0 && m->oc.G > 0 && !o->into) rc = os_omni_config_write(path, &oc);
        snprintf(path, sizeof path, "%s%s/adapter_config.json", tmp, ad);
        if (rc == 0 && lora && !merge) rc = os_path_absolute(o->final_dir ? o->final_dir : out_dir, NULL, base, sizeof base);
        if (rc == 0 && lora && !merge) rc = write_adapter_config(m, path, base);
        if (rc == 0 && !o->into) rc = os_copy_model_files(src_dir, tmp, 0);
        if (rc == 0 && !o->into) rc = os_runfiles_may_replace(out_dir);   // a run's final_model: only its own is replaced
        if (rc == 0 && !o->into) rc = os_rename_dir_atomic(tmp, out_dir);
        if (rc == 0 && !o->into) rc = os_runfiles_record(out_dir);
        if (rc < 0) {
            os_err_ctx("export to %s", out_dir);
            if (!o->into) os_rm_rf(tmp);
        }
    }
    if (comm_any_failed(rc < 0)) {
        if (!root) os_err_echo("export to %s failed on rank 0", out_dir);
        return -1;
    }
    return 0;
}

static const struct {
    const char *name;
    int dtype;
} DTYPES[] = {{"float32", OS_DT_F32}, {"fp32", OS_DT_F32}, {"bfloat16", OS_DT_BF16}, {"bf16", OS_DT_BF16},
              {"float16", OS_DT_F16}, {"fp16", OS_DT_F16}};

const char *os_export_dtype_name(int dtype) {
    return dtype == OS_DT_BF16 ? "bfloat16" : dtype == OS_DT_F16 ? "float16" : "float32";
}

int os_export_dtype(const char *name, const char *model_dir, int *dtype) {
    os_qwen2_config c;
    char path[4200];
    int from_model = !name || !strcmp(name, "auto");
    if (from_model) {
        snprintf(path, sizeof path, "%s/config.json", model_dir);
        if (os_qwen2_config_load(path, &c) < 0) return -1;
        name = c.torch_dtype;
    }
    for (size_t k = 0; k < sizeof DTYPES / sizeof DTYPES[0]; k++)
        if (!strcmp(name, DTYPES[k].name)) return *dtype = DTYPES[k].dtype, 0;
    if (from_model) return *dtype = OS_DT_F32, 0;   // float64, ...: the trained precision
    return os_errf("--save_dtype: expected auto (the model's torch_dtype), float32, bfloat16 or float16 (fp32, bf16, "
                   "fp16), got '%s'", name);
}

int os_export_shard_size(const char *text, int64_t *bytes) {
    static const struct {
        const char *unit;
        double scale;
    } U[] = {{"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"KiB", 1024.0},
             {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    char *end;
    double v = text ? strtod(text, &end) : 0;
    for (size_t k = 0; text && end != text && k < sizeof U / sizeof U[0]; k++)
        if (!strcasecmp(end, U[k].unit) && v * U[k].scale >= 1 && v * U[k].scale < 9.2e18)
            return *bytes = (int64_t)(v * U[k].scale), 0;
    return os_errf("--max_shard_size: expected a size such as 5GB, 500MB, 2GiB or a byte count >= 1, got '%s'",
                   text ? text : "(none)");
}
