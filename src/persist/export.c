#include "persist/export.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/atomic.h"
#include "io/hfconfig.h"
#include "io/safetensors.h"
#include "kernels/ops.h"
#include "zero/comm.h"
#include "zero/stage.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

// which file a parameter goes to: 0 model.safetensors, 1 slam_omni.safetensors, 2 the PEFT adapter file
static int file_of(const char *name) { return os_is_lora_param(name) ? 2 : os_is_slam_param(name); }

// open a writer for the parameters of file `which` (file_of); NULL writer when there are none. The adapter file
// names its tensors as PEFT saves them: "base_model.model." + name.
static int open_writer(const os_model *m, const char *path, int which, os_st_writer **w) {
    const os_registry *r = &m->reg;
    int n = 0;
    const char **names = os_alloc(sizeof(char *) * (size_t)r->np, "export names");
    char(*peft)[136] = os_alloc(sizeof(char[136]) * (size_t)r->np, "export names");
    int *nd = os_alloc(sizeof(int) * (size_t)r->np, "export ndims");
    int64_t(*sh)[8] = os_alloc(sizeof(int64_t[8]) * (size_t)r->np, "export shapes");
    for (int i = 0; i < r->np; i++) {
        if (file_of(r->p[i].name) != which || !exported(m, r->p[i].bucket)) continue;
        snprintf(peft[n], sizeof peft[n], "base_model.model.%s", r->p[i].name);
        names[n] = which == 2 ? peft[n] : r->p[i].name, nd[n] = r->p[i].ndim;
        memcpy(sh[n], r->p[i].shape, sizeof(int64_t) * 4);
        n++;
    }
    const char *meta[] = {"format", "pt", NULL};
    *w = n ? os_st_writer_begin(path, n, names, nd, (const int64_t(*)[8])sh, meta) : NULL;
    os_free(names), os_free(peft), os_free(nd), os_free(sh);
    return n && !*w ? -1 : 0;
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
    os_k->gemm(0, 0, O, I, r, m->oc.lora.alpha / (float)r, zr_param(rt, m->layer[l].lora_b[t]), r,
               zr_param(rt, m->layer[l].lora_a[t]), I, 1.0f, dst, I);
}

// the layer whose bucket b is, or -1
static int64_t layer_of(const os_model *m, int b) {
    for (int64_t l = 0; l < m->nlayers; l++)
        if (m->b_layer[l] == b) return l;
    return -1;
}

// rank 0's writes of bucket b (gathered as `full`, on the backend): every parameter into its file (from the
// backend a piece at a time), LoRA targets merged
static int put_bucket(const os_model *m, zr_runtime *rt, int b, const float *full, os_st_writer **w, int merge) {
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
        os_st_writer *wr = w[file_of(r->p[i].name)];
        rc = wr ? zr_stage_put(&st, wr, src, r->p[i].numel) : 0;
        os_k->free(tmp);
    }
    zr_stage_free(&st);
    return rc < 0 ? -1 : 0;
}

int os_export(const os_model *m, zr_runtime *rt, const char *src_dir, const char *out_dir, int merge_lora) {
    int root = comm_rank() == 0, rc = 0, lora = m->b_lora != NULL, merge = lora && merge_lora;
    char tmp[4096], path[4200], src[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", out_dir, (int)getpid());
    os_st_writer *w[3] = {NULL, NULL, NULL};   // model, slam_omni, PEFT adapter (file_of)
    if (root) {
        os_rm_rf(tmp);
        rc = os_mkdir_p(tmp);
        snprintf(path, sizeof path, "%s/model.safetensors", tmp);
        if (rc == 0) rc = open_writer(m, path, 0, &w[0]);
        snprintf(path, sizeof path, "%s/slam_omni.safetensors", tmp);
        if (rc == 0 && m->oc.G > 0) rc = open_writer(m, path, 1, &w[1]);
        snprintf(path, sizeof path, "%s/lora_adapter", tmp);
        if (rc == 0 && lora && !merge) rc = os_mkdir_p(path);
        snprintf(path, sizeof path, "%s/lora_adapter/adapter_model.safetensors", tmp);
        if (rc == 0 && lora && !merge) rc = open_writer(m, path, 2, &w[2]);
    }
    const os_registry *r = &m->reg;
    for (int b = 0; b < r->nb; b++) {   // every rank takes part in the gathers, whatever rank 0's state
        if (!exported(m, b) || (merge && layer_of(m, b) < 0 && w[2] == NULL && os_is_lora_param(r->p[r->b[b].first].name)))
            continue;   // merged: LoRA buckets are read with their layer
        int64_t l = merge ? layer_of(m, b) : -1;
        float *full = zr_gather(rt, b);
        if (l >= 0) zr_gather(rt, m->b_lora[l]);
        if (root && rc == 0) rc = put_bucket(m, rt, b, full, w, merge);
        if (l >= 0) zr_release(rt, m->b_lora[l]);
        zr_release(rt, b);
    }
    if (root) {
        for (int k = 0; k < 3; k++) {
            if (rc == 0 && w[k]) rc = os_st_writer_finish(w[k]), w[k] = NULL;
            os_st_writer_abort(w[k]);
        }
        snprintf(src, sizeof src, "%s/config.json", src_dir);
        snprintf(path, sizeof path, "%s/config.json", tmp);
        if (rc == 0) rc = os_qwen2_config_rewrite(src, path, (int)m->V);
        snprintf(path, sizeof path, "%s/slam_omni.json", tmp);
        os_omni_config oc = m->oc;
        oc.lora.rank = 0;   // merged or base + adapter: the exported model itself has no LoRA
        if (rc == 0 && m->oc.G > 0) rc = os_omni_config_write(path, &oc);
        snprintf(path, sizeof path, "%s/lora_adapter/adapter_config.json", tmp);
        if (rc == 0 && lora && !merge) rc = write_adapter_config(m, path, out_dir);
        if (rc == 0) rc = os_copy_model_files(src_dir, tmp, 0);
        if (rc == 0) rc = os_rename_dir_atomic(tmp, out_dir);
        if (rc < 0) {
            os_err_ctx("export to %s", out_dir);
            os_rm_rf(tmp);
        }
    }
    if (comm_any_failed(rc < 0)) {
        if (!root) os_err_echo("export to %s failed on rank 0", out_dir);
        return -1;
    }
    return 0;
}
