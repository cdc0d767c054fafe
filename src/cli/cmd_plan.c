// omnishard plan: per-rank memory for a model, world size, ZeRO stage, sequence length and batch, with and
// without activation recomputation, and whether it fits a device of --device_memory bytes.
#include "cli/commands.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/knobs.h"
#include "io/hfconfig.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "model/freeze.h"
#include "model/omni.h"
#include "train/plan.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define GB 1e9   // the table's GB: 10^9 bytes
#define BASELINE_BYTES OS_PLAN_BASELINE_BYTES

static int parse_bytes(const char *s, double *out) {
    char *e;
    double v = strtod(s, &e);
    if (e == s || v <= 0) return -1;
    if (!strcasecmp(e, "GB") || !strcasecmp(e, "G")) v *= 1e9;
    else if (!strcasecmp(e, "GiB")) v *= 1073741824.0;
    else if (!strcasecmp(e, "MB") || !strcasecmp(e, "M")) v *= 1e6;
    else if (*e) return -1;
    *out = v;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: omnishard plan --model DIR|PRESET | --config config.json  [--nproc 8] [--zero_stage 2,3]\n"
               "       [--max_length 3072] [--batch 1] [--gradient_accumulation_steps 1]\n"
               "       [--gradient_checkpointing true,false] [--device_memory 32GB]\n"
               "       [--model_type slam_omni|qwen2] [--code_layer 3]\n"
               "       [--freeze_llm B] [--freeze_group_decode_adapter B] [--trainable_embed_rows all|new|audio|none]\n"
               "       [--train_type full|lora] [--lora_rank 8] [--lora_dropout 0.05] [--target_modules all-linear]\n"
               "       [--torch_dtype float32|bfloat16] [--new_rows_init mean_resizing|normal]\n"
               "       [--speech_encoder WHISPER_DIR|whisper-small|whisper-medium|whisper-large-v3]\n"
               "GB: 10^9 bytes, in the table and in --device_memory (which also takes GiB = 2^30 bytes, MB = 10^6)\n"
               "presets: qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-7b (SLAM-Omni vocabulary added by default)\n");
}

static int load_config(const char *model, const char *config, os_qwen2_config *c) {
    char path[4200];
    struct stat st;
    if (config) return os_qwen2_config_load(config, c);
    if (stat(model, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(path, sizeof path, "%s/config.json", model);
        return os_qwen2_config_load(path, c);
    }
    if (os_plan_preset(model, c) == 0) return 0;
    if (os_hub_id_check("--model", model) < 0) return -1;
    return os_errf("--model '%s': not a model directory nor a preset (qwen2.5-0.5b, -1.5b, -3b, -7b)", model);
}

// what loading reads for each parameter (os_plan_src): from the model directory's safetensors headers, or for a
// preset / --config alone the release checkpoint's layout: every required tensor, vocab_size rows of the
// embedding and lm_head, BF16
static int load_sources(const char *model, const os_model *m, const os_qwen2_config *cfg, os_plan_src *src) {
    struct stat sb;
    os_st_dir *d = NULL;
    if (model && stat(model, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (!(d = os_st_dir_open(model))) return -1;
        char p[4200];
        snprintf(p, sizeof p, "%s/slam_omni.safetensors", model);
        if (m->oc.G > 0 && stat(p, &sb) == 0 && os_st_dir_add_file(d, p) < 0) return os_st_dir_close(d), -1;
    }
    for (int i = 0; i < m->reg.np; i++) {
        const os_param *q = &m->reg.p[i];
        int64_t rows = q->shape[0], width = q->numel / (rows ? rows : 1);
        src[i] = (os_plan_src){0, 0, 2};
        if (d) {
            const os_st_tensor *t = os_st_dir_find(d, q->name);
            if (!t) continue;
            rows = t->ndim ? t->shape[0] : 1;
            src[i].have = t->numel < q->numel ? t->numel : q->numel, src[i].bytes = os_st_dtype_size(t->dtype);
        } else if (q->resizable) {
            rows = cfg->vocab_size < rows ? cfg->vocab_size : rows, src[i].have = rows * width;
        } else if (q->init == OS_INIT_REQUIRED) {
            src[i].have = q->numel;
        }
        if (q->resizable && rows < q->shape[0]) src[i].rows = rows;
    }
    os_st_dir_close(d);
    return 0;
}

int cmd_plan(int argc, char **argv) {
    const char *model = NULL, *config = NULL, *type = "slam_omni", *stages = "0,1,2,3", *ckpts = "true,false";
    long nproc = 1, L = 2048, B = 1, G = 3, accum = 1;
    int bf16 = 0;
    double dev = 0;
    os_freeze_opts fz = {0, 0, 0, NULL};
    os_lora_config lora = {0, 32.0f, 0.05f, 0};
    int lora_rank = 8;
    const char *targets = "all-linear", *new_rows = "mean_resizing", *speech = NULL;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) return usage(stdout), 0;
        if (!v) return fprintf(stderr, "omnishard plan: '%s' needs a value\n", k), 2;
        i++;
        if (!strcmp(k, "--model")) model = v;
        else if (!strcmp(k, "--config")) config = v;
        else if (!strcmp(k, "--speech_encoder")) speech = v;
        else if (!strcmp(k, "--model_type")) type = v;
        else if (!strcmp(k, "--zero_stage")) stages = v;
        else if (!strcmp(k, "--deepspeed") && !strncmp(v, "zero", 4)) stages = v + 4;
        else if (!strcmp(k, "--gradient_checkpointing")) ckpts = v;
        else if (!strcmp(k, "--nproc")) nproc = atol(v);
        else if (!strcmp(k, "--max_length")) L = atol(v);
        else if (!strcmp(k, "--batch") || !strcmp(k, "--per_device_train_batch_size")) B = atol(v);
        else if (!strcmp(k, "--gradient_accumulation_steps")) accum = atol(v);
        else if (!strcmp(k, "--code_layer")) G = atol(v);
        else if (!strcmp(k, "--freeze_llm") || !strcmp(k, "--freeze_group_decode_adapter")) {
            int on = !strcmp(v, "true") || !strcmp(v, "1");
            if (!on && strcmp(v, "false") && strcmp(v, "0"))
                return fprintf(stderr, "omnishard plan: %s: expected true or false, got '%s'\n", k, v), 2;
            *(k[9] == 'l' ? &fz.llm : &fz.group_decode_adapter) = on;
        } else if (!strcmp(k, "--trainable_embed_rows")) fz.embed_rows = v;
        else if (!strcmp(k, "--train_type") && (!strcmp(v, "lora") || !strcmp(v, "full"))) lora.rank = v[0] == 'l';
        else if (!strcmp(k, "--lora_rank")) lora_rank = atoi(v);
        else if (!strcmp(k, "--lora_dropout")) lora.dropout = (float)atof(v);
        else if (!strcmp(k, "--target_modules")) targets = v;
        else if (!strcmp(k, "--new_rows_init")) {
            if (strcmp(v, "mean_resizing") && strcmp(v, "normal"))
                return fprintf(stderr, "omnishard plan: --new_rows_init: '%s' is not supported (supported: "
                                       "mean_resizing, normal)\n", v), 2;
            new_rows = v;
        }
        else if (!strcmp(k, "--torch_dtype")) {
            if (strcmp(v, "float32") && strcmp(v, "fp32") && strcmp(v, "bfloat16") && strcmp(v, "bf16"))
                return fprintf(stderr, "omnishard plan: --torch_dtype: '%s' is not supported (supported: float32, fp32, "
                                       "bfloat16 or bf16)\n", v), 2;
            bf16 = v[0] == 'b';
        } else if (!strcmp(k, "--device_memory")) {
            if (parse_bytes(v, &dev) < 0) return fprintf(stderr, "omnishard plan: --device_memory: expected e.g. 32GB, got '%s'\n", v), 2;
        } else return fprintf(stderr, "omnishard plan: unknown option '%s'\n", k), usage(stderr), 2;
    }
    if ((!model && !config) || nproc < 1 || L < 2 || B < 1 || accum < 1 || G < 0 || G > OS_MAX_G) return usage(stderr), 2;
    os_qwen2_config cfg;
    if (load_config(model, config, &cfg) < 0) return fprintf(stderr, "omnishard plan: %s\n", os_errmsg()), 1;
    os_omni_config oc;
    os_omni_config_default(&oc, strcmp(type, "qwen2") ? (int)G : 0);
    if (model && oc.G > 0) {
        char p[4200];
        snprintf(p, sizeof p, "%s/slam_omni.json", model);
        if (os_omni_config_load(p, &oc) < 0) return fprintf(stderr, "omnishard plan: %s\n", os_errmsg()), 1;
    }
    if (lora.rank) {
        if (lora_rank < 1 || os_lora_parse_targets(targets, &lora.targets) < 0)
            return fprintf(stderr, "omnishard plan: %s\n", lora_rank < 1 ? "--lora_rank: expected >= 1" : os_errmsg()), 2;
        lora.rank = lora_rank;
        oc.lora = lora;
    }
    os_whisper_config wc;
    if (speech && os_plan_speech_config(speech, &oc, &wc) < 0) return fprintf(stderr, "omnishard plan: %s\n", os_errmsg()), 1;
    os_model m;
    if (os_model_build(&m, &cfg, &oc) < 0 || (speech && os_whisper_declare(&m.enc, &m.reg, &wc) < 0) ||
        os_model_freeze(&m, &fz) < 0)
        return fprintf(stderr, "omnishard plan: %s\n", os_errmsg()), 1;
    os_plan_src *src = os_alloc(sizeof *src * (size_t)m.reg.np, "plan sources");
    if (load_sources(model, &m, &cfg, src) < 0) return fprintf(stderr, "omnishard plan: %s\n", os_errmsg()), 1;
    int mean_rows = !strcmp(new_rows, "mean_resizing");
    int64_t P = os_reg_numel(&m.reg, 0), Ptr = os_reg_numel(&m.reg, 1);
    printf("model: %s  %.3fB parameters, %.3fB trained (hidden %lld, %lld layers, vocab %lld, G %d, %s head)  ranks %ld  "
           "max_length %ld  batch %ld\n", model ? model : config, (double)P / 1e9, (double)Ptr / 1e9, (long long)m.C, (long long)m.nlayers,
           (long long)m.V, m.oc.G, cfg.tie_word_embeddings ? "tied" : "untied", nproc, L, B);
    const char *path = "sgemm";
    if (bf16 && k_gemm_bf16_setup(os_knobs()->bf16_gemm, &path) < 0) return fprintf(stderr, "omnishard plan: %s\n", os_errmsg()), 2;
    int onednn = bf16 && !strcmp(path, "onednn"), esz = bf16 ? (onednn ? 2 : 4) : 0;
    double conv = bf16 ? (double)os_plan_bf16(&m, B, L, esz) : 0, stash = bf16 ? (double)os_plan_bf16_stash(&m, B, L, esz) : 0;
    printf("%-5s %-9s %9s %9s %9s %9s %11s %9s %9s%s\n", "stage", "recompute", "params", "grads", "optimizer", "buffers",
           "activations", "total GB", "start-up", dev > 0 ? "  fits" : "");
    int fits = 0;
    for (const char *s = stages; *s; s++) {
        if (*s < '0' || *s > '3') continue;
        for (int pass = 0; pass < 2; pass++) {
            int rc = pass == 0;
            if (!strstr(ckpts, rc ? "true" : "false")) continue;
            os_plan p;
            os_plan_compute(&m, (int)nproc, *s - '0', B, L, rc, accum, esz, &p);
            int64_t up = os_plan_startup(&m, (int)nproc, *s - '0', src, mean_rows);
            double tot = (double)((p.total > up ? p.total : up) + BASELINE_BYTES);
            printf("%-5c %-9s %9.3f %9.3f %9.3f %9.3f %11.3f %9.3f %9.3f", *s, rc ? "yes" : "no",
                   (p.params + p.rounded) / GB, p.grads / GB, p.optim / GB, p.gather / GB, p.activations / GB, tot / GB,
                   up / GB);
            if (dev > 0) printf("  %s", tot <= dev ? "yes" : "NO"), fits |= tot <= dev;
            printf("\n");
        }
    }
    if (bf16)
        printf("(bf16 mixed precision on the %s path: activations include %.3f GB of bf16-rounded GEMM inputs, %.3f GB "
               "of them the head's stash of rounded gradients; params include, at stages 0-2, a rounded copy of each "
               "bucket holding matrices (%d bytes per element); stage 3 gathers those buckets at %d bytes per element; "
               "fp32 master weights, gradients and AdamW)\n", onednn ? "oneDNN" : "sgemm", (conv + stash) / GB,
               stash / GB, esz, esz);
    if (dev > 0 && !fits) {
        os_plan_fit asked = {(int)nproc, 3, 1, B, accum, 0}, f;
        if (os_plan_suggest(&m, &asked, L, esz, src, mean_rows, (int64_t)dev, &f))
            printf("nothing above fits %.3f GB; the nearest that fits: --nproc %d --zero_stage %d --gradient_checkpointing %s "
                   "--per_device_train_batch_size %lld --gradient_accumulation_steps %lld (%.3f GB per rank, global "
                   "batch %lld)\n", dev / GB, f.nranks, f.stage, f.recompute ? "true" : "false", (long long)f.batch,
                   (long long)f.accum, f.total / GB, (long long)(f.nranks * f.batch * f.accum));
        else
            printf("nothing fits %.3f GB, not even on 4096 ranks at stage 3 with recomputation and batch 1: shorten "
                   "--max_length (%ld), or freeze parts (--freeze_llm, --train_type lora)\n", dev / GB, L);
    }
    if (m.enc.nlayers) {
        int64_t enc = 0;
        for (int b = m.enc.b_front; b <= m.enc.b_final; b++) enc += m.reg.b[b].numel;
        printf("(speech encoder %s: its %.3fB frozen parameters in params; activations include %.3f GB of the speech "
               "path at stage 0: log-mel, encoder output, projector buffers, one sample's encoder forward)\n", speech,
               (double)enc / 1e9, (double)os_plan_speech(&m, (int)nproc, 0, B) / GB);
    }
    printf("(per rank, GB = 10^9 bytes, %s; buffers = gathered parameter and full gradient buckets at the peak; start-up = loading: "
           "parameters, the checkpoint pages read%s; total = the larger of the step and start-up, plus %.2f GB of "
           "process baseline)\n", bf16 ? "bf16 GEMMs, fp32 state" : "fp32",
           mean_rows ? ", mean_resizing's C x C covariance" : "", BASELINE_BYTES / GB);
    os_free(src);
    os_model_free(&m);
    return 0;
}
