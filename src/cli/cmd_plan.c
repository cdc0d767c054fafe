// omnishard plan: per-rank memory for a model, world size, ZeRO stage, sequence length and batch, with and
// without activation recomputation, and whether it fits a device of --device_memory bytes.
#include "cli/commands.h"
#include "core/alloc.h"
#include "core/device.h"
#include "core/err.h"
#include "core/opts.h"
#include "core/numtext.h"
#include "io/hfconfig.h"
#include "io/safetensors.h"
#include "cuda/cuda.h"
#include "kernels/kernels.h"
#include "model/freeze.h"
#include "model/omni.h"
#include "train/args.h"
#include "train/ds_config.h"
#include "train/dtype_default.h"
#include "train/plan.h"
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define GB 1e9   // the table's GB: 10^9 bytes
#define BASELINE_BYTES OS_PLAN_BASELINE_BYTES
// --device cuda: device memory beyond the step's buffers: cuBLASLt's workspace (src/cuda/cu_lt.c) and the CUDA
// context with the kernels' modules (an estimate until the device check measures it: docs/performance.md)
#define CUDA_WORKSPACE_BYTES ((int64_t)32 << 20)
#define CUDA_CONTEXT_BYTES (int64_t)500000000

// plan's own options; the training options (sft's table) fill an os_sft_args beside them
typedef struct {
    const char *config, *stages, *ckpts;
    int64_t nproc, batch;   // batch 0: --per_device_train_batch_size's
    double device_memory;   // bytes; 0: not given
} plan_args;

static int parse_device_memory(void *obj, const char *s) {
    const char *e = s;
    double v = 0;
    int ok = os_parse_decimal_prefix(s, &e, &v) == 0 && v > 0;   // decimal only, as every option (issue 24)
    double unit = !ok ? 0 : !*e ? 1 : !strcasecmp(e, "GB") || !strcasecmp(e, "G") ? 1e9
                : !strcasecmp(e, "GiB") ? 1073741824.0 : !strcasecmp(e, "MB") || !strcasecmp(e, "M") ? 1e6 : 0;
    v *= unit;
    if (!(v > 0) || !isfinite(v))
        return os_errf("--device_memory: expected e.g. 32GB (GB = 10^9 bytes, GiB = 2^30, MB = 10^6), got '%s'", s);
    ((plan_args *)obj)->device_memory = v;
    return 0;
}

static void show_device_memory(const void *obj, char *buf, size_t n) {
    snprintf(buf, n, "%.17g", ((const plan_args *)obj)->device_memory);
}

// a comma-separated list whose items are among `allowed` ("0|1|2|3"); the option's message otherwise
static int parse_list(const char *name, const char *v, const char *allowed) {
    for (const char *s = v; *s; s += *s == ',') {
        size_t k = strcspn(s, ","), at = 0;
        while (allowed[at] && !(strncmp(allowed + at, s, k) == 0 && (allowed[at + k] == '|' || !allowed[at + k])))
            at += strcspn(allowed + at, "|"), at += allowed[at] == '|';
        if (!k || !allowed[at]) return os_errf("--%s: expected a comma-separated list of %s, got '%s'", name, allowed, v);
        s += k;
    }
    return *v ? 0 : os_errf("--%s: expected a comma-separated list of %s, got ''", name, allowed);
}

static int parse_stages(void *obj, const char *v) {
    ((plan_args *)obj)->stages = v;
    return parse_list("zero_stage", v, "0|1|2|3");
}

static int parse_ckpts(void *obj, const char *v) {
    ((plan_args *)obj)->ckpts = v;
    return parse_list("gradient_checkpointing", v, "true|false");
}

static void show_stages(const void *obj, char *buf, size_t n) { snprintf(buf, n, "%s", ((const plan_args *)obj)->stages); }
static void show_ckpts(const void *obj, char *buf, size_t n) { snprintf(buf, n, "%s", ((const plan_args *)obj)->ckpts); }

#define F(n) .name = #n, .off = offsetof(plan_args, n)
static const os_opt OPTS[] = {
    {F(config), .type = OS_OPT_STR, .metavar = "FILE", .help = "a config.json instead of --model"},
    {F(nproc), .type = OS_OPT_I64, .range = "[1,1048576]", .help = "ranks (default 1)"},
    {.name = "zero_stage", .type = OS_OPT_CUSTOM, .parse = parse_stages, .show = show_stages, .metavar = "S,S,..",
     .help = "the ZeRO stages to show, a list of 0-3 (default 0,1,2,3)"},
    {.name = "gradient_checkpointing", .type = OS_OPT_CUSTOM, .parse = parse_ckpts, .show = show_ckpts,
     .metavar = "B,B", .help = "with and/or without recomputation: true, false or true,false (default true,false)"},
    {F(batch), .type = OS_OPT_I64, .range = "[1,2147483647]", .help = "same as --per_device_train_batch_size"},
    {.name = "device_memory", .type = OS_OPT_CUSTOM, .parse = parse_device_memory, .show = show_device_memory,
     .metavar = "BYTES", .help = "say whether each row fits a device of this size: 32GB (10^9 bytes), 30GiB (2^30), 900MB"},
};
#undef F

static const char USAGE[] =
    "usage: omnishard plan --model DIR|PRESET | --config config.json  [--nproc 8] [--zero_stage 2,3] [sft options]\n"
    "presets: qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-7b (SLAM-Omni vocabulary added by default)\n"
    "Per-rank memory of the run omnishard sft would make with the same options: an sft command line can be\n"
    "planned as it is (--dataset and --output_dir are not needed). Of the training options, --model, --model_type,\n"
    "--code_layer, --max_length, --per_device_train_batch_size, --gradient_accumulation_steps, the --freeze_*\n"
    "switches, --trainable_embed_rows, --train_type, --lora_rank, --target_modules, --torch_dtype and\n"
    "--new_rows_init and --speech_encoder (WHISPER_DIR, or a preset: whisper-small, whisper-medium,\n"
    "whisper-large-v3) change the plan; the others are checked as sft checks them and change nothing here.\n"
    "GB: 10^9 bytes, in the table and in --device_memory (which also takes GiB = 2^30 bytes, MB = 10^6).\n";

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

// --deepspeed as sft reads it: a stage name sets that stage; a DeepSpeed JSON file is applied as sft applies it
// (its batch sizes, accumulation and bf16 set the options the plan reads; its ZeRO stage, unless "auto", is the one
// row shown, and must agree with a --zero_stage naming one stage). par->zero_stage: the stage, or -1 (all of
// --zero_stage's list); the three sections a DeepSpeed file sets, as sft's os_ds_config_apply takes them
static int deepspeed_stage(os_sft_parallelism_opts *par, os_sft_training_opts *tr, os_sft_checkpoint_opts *ck,
                           const plan_args *p, int stages_given, int argc, char **argv) {
    if (!par->deepspeed_file) return 0;
    if (stages_given && strlen(p->stages) > 1)   // the file's stage is compared with the flag's, as sft does: one stage
        return os_errf("--deepspeed %s with --zero_stage %s: give --zero_stage one stage (the file's "
                       "\"zero_optimization.stage\" must agree with it) or leave it out", par->deepspeed_file, p->stages);
    if (stages_given) par->zero_stage = p->stages[0] - '0';
    if (os_ds_config_apply(par, tr, ck, argc, argv) < 0) return -1;
    fprintf(stderr, "omnishard plan: %s\n", par->ds_notes);
    return 0;
}

// --torch_dtype auto as sft settles it: the model's config.json (--config's, a preset's: the release's bfloat16)
static void settle_dtype(os_sft_training_opts *t, const char *model, int tf32, const char *config, char *line, size_t n) {
    os_qwen2_config cfg;
    char source[4200] = "";
    if (load_config(model, config, &cfg) < 0) cfg.torch_dtype[0] = 0;   // reported when the plan loads it
    if (config) snprintf(source, sizeof source, "%s", config);
    else {
        struct stat st;
        int dir = stat(model, &st) == 0 && S_ISDIR(st.st_mode);
        snprintf(source, sizeof source, dir ? "%s/config.json" : "the %s release's config.json", model);
    }
    os_sft_dtype_settle(t, tf32, cfg.torch_dtype, source, "plan", line, n);
}

int cmd_plan(int argc, char **argv) {
    plan_args p = {.stages = "0,1,2,3", .ckpts = "true,false", .nproc = 1};
    os_sft_args sa;
    os_sft_args_defaults(&sa);
    sa.parallelism.zero_stage = -1;   // set only by sft's --deepspeed (plan's own --zero_stage takes the list)
    int nsft, nsec;
    const os_opt *sft = os_sft_options(&nsft);
    const os_opt_section *sec = os_sft_sections(&nsec);
    const os_opt_group groups[] = {{.title = "plan options", .opts = OPTS, .n = (int)(sizeof OPTS / sizeof OPTS[0]),
                                    .obj = &p},
                                   {"training options (omnishard sft --help)", sft, nsft, &sa, sec, nsec}};
    unsigned char pgiven[sizeof OPTS / sizeof OPTS[0]] = {0}, *const given[] = {pgiven, sa.given};
    os_opt_cmd c = {.command = "plan", .usage = USAGE, .groups = groups, .ngroups = 2, .given = given,
                    .known_given = sa.known_given};
    c.known = os_sft_swift_known(&c.nknown);   // ms-swift's options, as sft takes them
    int rc = os_opts_parse(&c, argc, argv);
    if (rc == 1) return os_opts_usage(&c, stdout), 0;
    if (rc == 0 && !sa.model.model && !p.config) rc = os_errf("give --model DIR|PRESET or --config config.json");
    char dtype_line[4600] = "";
    if (rc == 0) settle_dtype(&sa.training, sa.model.model, sa.device.tf32, p.config, dtype_line, sizeof dtype_line);   // before the file's bf16.enabled, as sft
    const char *settled = sa.training.torch_dtype;
    if (rc == 0) rc = deepspeed_stage(&sa.parallelism, &sa.training, &sa.checkpoint, &p, pgiven[2], argc, argv);   // OPTS[2]: --zero_stage
    if (rc == 0 && strcmp(settled, sa.training.torch_dtype)) dtype_line[0] = 0;   // the file chose (its note says so)
    if (rc == 0) rc = os_sft_args_lora_check(&sa);
    if (rc == 0) rc = os_tf32_check(sa.device.tf32, sa.device.device, os_sft_args_bf16(&sa.training));   // as sft would refuse it
    if (rc < 0) return fprintf(stderr, "omnishard plan: %s\n", os_errmsg()), 2;
    os_sft_swift_notes(sa.known_given, "plan");
    if (dtype_line[0]) fprintf(stderr, "%s\n", dtype_line);
    char one[2] = {(char)('0' + sa.parallelism.zero_stage), 0};
    const char *model = sa.model.model, *config = p.config, *type = sa.model.model_type;
    const char *stages = sa.parallelism.zero_stage >= 0 ? one : p.stages;
    const char *ckpts = p.ckpts, *new_rows = sa.model.new_rows_init, *speech = sa.model.speech_encoder;
    long nproc = (long)p.nproc, L = (long)sa.data.max_length, B = (long)(p.batch ? p.batch : sa.training.per_device_train_batch_size);
    long G = sa.model.code_layer >= 0 ? sa.model.code_layer : 3, accum = (long)sa.training.gradient_accumulation_steps;
    int bf16 = !strcmp(sa.training.torch_dtype, "bfloat16");
    double dev = p.device_memory;
    os_freeze_opts fz = {sa.model.freeze_llm, sa.model.freeze_encoder_projector, sa.model.freeze_group_decode_adapter, sa.model.trainable_embed_rows};
    os_lora_config lora = {0, (float)sa.model.lora_alpha, (float)sa.model.lora_dropout, 0};
    os_qwen2_config cfg;
    if (load_config(model, config, &cfg) < 0) return fprintf(stderr, "omnishard plan: %s\n", os_errmsg()), 1;
    os_omni_config oc;
    os_omni_config_default(&oc, strcmp(type, "qwen2") ? (int)G : 0);
    if (model && oc.G > 0) {
        char p[4200];
        snprintf(p, sizeof p, "%s/slam_omni.json", model);
        if (os_omni_config_load(p, &oc) < 0) return fprintf(stderr, "omnishard plan: %s\n", os_errmsg()), 1;
    }
    if (!strcmp(sa.model.train_type, "lora")) {
        if (os_lora_parse_targets(sa.model.target_modules, &lora.targets) < 0) return fprintf(stderr, "omnishard plan: %s\n", os_errmsg()), 2;
        lora.rank = sa.model.lora_rank;
        oc.lora = lora;
    }
    int recorded = !speech && oc.speech_encoder[0];
    if (recorded) speech = oc.speech_encoder;   // a model trained with speech: the encoder its slam_omni.json records
    os_whisper_config wc;
    if (speech && os_plan_speech_config(speech, &oc, &wc) < 0)
        return fprintf(stderr, "omnishard plan: %s%s\n", os_errmsg(), recorded ? " (the encoder the model's "
                       "slam_omni.json records; give --speech_encoder DIR)" : ""), 1;
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
    // --device cuda: device memory per GPU, as the CUDA backend lays it out (bf16 copies of 2 bytes, attention
    // stats of the fused kernel: a log-sum-exp per query row)
    int index, cuda = os_device_parse(sa.device.device, &index) == 1;
    os_ops planned = *os_k;
    if (cuda) planned.attention_stats_floats = os_cuda_attention_stats_floats, os_k = &planned;
    const char *path = cuda ? "cuBLASLt" : "sgemm";
    if (bf16 && !cuda && k_gemm_bf16_setup(NULL, &path) < 0) return fprintf(stderr, "omnishard plan: %s\n", os_errmsg()), 2;
    int onednn = bf16 && !strcmp(path, "onednn"), esz = bf16 ? (onednn || cuda ? 2 : 4) : 0;
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
            double tot = cuda ? (double)(p.total + CUDA_WORKSPACE_BYTES + CUDA_CONTEXT_BYTES)
                              : (double)((p.total > up ? p.total : up) + BASELINE_BYTES);
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
               "fp32 master weights, gradients and AdamW)\n", cuda ? "cuBLASLt" : onednn ? "oneDNN" : "sgemm", (conv + stash) / GB,
               stash / GB, 2, 2);
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
               "path at stage 0: log-mel, encoder output, projector buffers, the encoder's forward of every clip at "
               "once)\n", speech,
               (double)enc / 1e9, (double)os_plan_speech(&m, (int)nproc, 0, B, esz) / GB);
    }
    char total[160];
    if (cuda)
        snprintf(total, sizeof total, "device memory per GPU: the step's buffers + %.3f GB of cuBLASLt workspace + "
                 "%.2f GB for the CUDA context (an estimate); start-up is host memory", CUDA_WORKSPACE_BYTES / GB,
                 CUDA_CONTEXT_BYTES / GB);
    else
        snprintf(total, sizeof total, "the larger of the step and start-up, plus %.2f GB of process baseline",
                 BASELINE_BYTES / GB);
    printf("(per rank, GB = 10^9 bytes, %s; buffers = gathered parameter and full gradient buckets at the peak; start-up = loading: "
           "parameters, the checkpoint pages read%s; total = %s)\n", bf16 ? "bf16 GEMMs, fp32 state" : "fp32",
           mean_rows ? ", mean_resizing's C x C covariance" : "", total);
    os_free(src);
    os_model_free(&m);
    return 0;
}
