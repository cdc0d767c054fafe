// The sft options table: parsing, ranges and allowed values, --help, and the values the ranks agree on at start.
#include "train/args.h"
#include "train/swift_defaults.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/numtext.h"
#include "core/opts.h"
#include "model/omni.h"
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { T_STR, T_CHOICE, T_F64, T_I64, T_INT, T_BOOL, T_STAGE, T_TERM, T_WEIGHTS } opt_type;
typedef struct {
    const char *name;
    opt_type type;
    size_t off;
    const char *help;
    const char *range;     // T_F64/T_I64/T_INT: "[lo,hi]", "(lo,hi)", "[lo,inf)" ... (checked at parse time)
    const char *choices;   // T_CHOICE: "a|b|c", the first is the default
    int per_rank;          // may differ between ranks: left out of the start-up agreement (docs/training.md)
} opt;

#define XSTR(x) #x
#define STR(x) XSTR(x)
#define F(n) .name = #n, .off = offsetof(os_sft_args, n)
#define S(n, h) {F(n), .type = T_STR, .help = h}
#define P(n, h) {F(n), .type = T_STR, .help = h, .per_rank = 1}
#define C(n, ch, h) {F(n), .type = T_CHOICE, .choices = ch, .help = h}
#define N(n, t, r, h) {F(n), .type = t, .range = r, .help = h}
#define B(n, h) {F(n), .type = T_BOOL, .help = h}
static const opt opts[] = {
    S(model, "Hugging Face Qwen2 / SLAM-Omni model directory (required)"),
    S(dataset, "training data: .jsonl (pretokenized or SLAM-Omni records) (required)"),
    S(output_dir, "where logging.jsonl, checkpoints and the final model go (required)"),
    B(overwrite_output_dir, "a --output_dir that holds an earlier run: remove its files (logging.jsonl, args.json, "
                            "checkpoint-N, final_model, images) first; without it such a directory is refused, unless "
                            "the run resumes a checkpoint of it (default false)"),
    B(add_version, "write into a new OUTPUT_DIR/vN-YYYYMMDD-HHMMSS run folder, as ms-swift (default false, ms-swift's "
                   "true: omnishard writes where --output_dir says)"),
    C(model_type, "slam_omni|qwen2", "slam_omni (a Qwen2 LLM with G audio layers) or qwen2 (plain causal LM)"),
    N(code_layer, T_INT, "[1," STR(OS_MAX_G) "]", "audio code layers G of slam_omni (default 3, or slam_omni.json)"),
    N(num_latency_tokens, T_INT, "[0,1048576]", "pad_a positions before the answer audio of every layer (default slam_omni.json's, else 0)"),
    B(do_layershift, "each audio layer its own A vocabulary rows, id T+g*A+a, no adapter (default slam_omni.json's, else false)"),
    B(mask_equal_length_audio, "the reference's mask of every audio label when text and audio have the same length (default false: trained)"),
    {.name = "loss_weights", .type = T_WEIGHTS, .help = "text,audio0,..: loss weights >= 0 (default 1/(G+1) each, the reference)"},
    N(num_train_epochs, T_F64, "(0,1e9]", "epochs (default 1)"),
    N(max_steps, T_I64, "[0,inf)", "optimizer steps; overrides epochs when > 0"),
    N(per_device_train_batch_size, T_I64, "[1,2147483647]", "samples per rank per micro-batch (default 1)"),
    N(gradient_accumulation_steps, T_I64, "[1,2147483647]", "micro-batches per optimizer step (default 1)"),
    N(learning_rate, T_F64, "[0,3.4e38]", "peak learning rate (default 1e-4)"),
    N(weight_decay, T_F64, "[0,3.4e38]", "AdamW weight decay, not applied to biases and norms (default 0)"),
    N(adam_beta1, T_F64, "[0,1)", "default 0.9"),
    N(adam_beta2, T_F64, "[0,1)", "default 0.999"),
    N(adam_epsilon, T_F64, "[0,3.4e38]", "default 1e-8"),
    N(max_grad_norm, T_F64, "[0,3.4e38]", "global gradient-norm clipping, 0 = off (default 1)"),
    N(warmup_steps, T_I64, "[0,inf)", "linear warm-up steps (default 0)"),
    N(warmup_ratio, T_F64, "[0,1)", "warm-up as a fraction of all steps when warmup_steps is 0 (default 0)"),
    C(lr_scheduler_type, "linear|constant|constant_with_warmup|cosine", "learning-rate schedule (default linear)"),
    N(max_length, T_I64, "[2,2147483647]", "longest sample in tokens (default 2048)"),
    C(truncation_strategy, "right|left|delete", "right keeps the start (default), left the end, delete skips (counted)"),
    N(logging_steps, T_I64, "[1,inf)", "log every N steps, and the last; loss and accuracies are the window's mean, as "
                                       "transformers' Trainer (default 1)"),
    N(save_steps, T_I64, "[0,inf)", "checkpoint every N steps, 0 = only at the end (default 500)"),
    N(save_total_limit, T_I64, "[0,inf)", "keep the newest N checkpoints (and the best by eval_loss), 0 = all (default 0)"),
    N(eval_steps, T_I64, "[0,inf)", "evaluate every N steps, 0 = at save_steps (needs val_dataset or split_dataset_ratio)"),
    S(val_dataset, "evaluation data"),
    N(split_dataset_ratio, T_F64, "[0,1)", "fraction of dataset held out for evaluation (default 0)"),
    C(new_rows_init, "mean_resizing|normal", "embedding/lm_head rows the checkpoint lacks (vocabulary resize): "
                                             "mean_resizing (default, transformers >= 4.46: N(mean, 1e-9 cov) of its rows) "
                                             "or normal (N(0, 0.02))"),
    N(seed, T_I64, "[0,inf)", "data order and new-parameter initialisation (default 42)"),
    N(zero_stage, T_INT, "[0,3]", "ZeRO stage (default 0; --deepspeed zero3 also works)"),
    {.name = "deepspeed", .type = T_STAGE, .help = "zero0 | zero1 | zero2 | zero3 (same as --zero_stage)"},
    B(gradient_checkpointing, "recompute each layer in the backward (default true)"),
    S(resume_from_checkpoint, "checkpoint directory to continue from"),
    B(resume_override_config, "resume although dataset, seed, max_length, truncation, split, model_type, "
                              "code_layer or loss weights differ from the checkpoint's run (default false)"),
    B(save_only_model, "checkpoints without optimizer state (default false)"),
    S(speech_encoder, "Hugging Face Whisper directory for speech questions"),
    C(train_type, "full|lora", "full (default) or lora: the LLM frozen, LoRA adapters on its linear layers (docs/training.md)"),
    N(lora_rank, T_INT, "[1,4096]", "LoRA rank r (default 8)"),
    N(lora_alpha, T_F64, "(0,3.4e38]", "LoRA alpha: the update is scaled by alpha / r (default 32)"),
    N(lora_dropout, T_F64, "[0,1)", "dropout on the LoRA input (default 0.05; counter-RNG masks, not PyTorch's)"),
    S(target_modules, "LoRA targets: all-linear (default) or a list of q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"),
    B(merge_lora, "final_model with LoRA merged (default true) or base + PEFT adapter directory final_model/lora_adapter"),
    B(freeze_llm, "freeze the LLM: layers, final norm, embed_tokens, lm_head (default false)"),
    B(freeze_encoder, "the speech encoder is always frozen (default true; false is refused)"),
    B(freeze_encoder_projector, "freeze the speech projector (default false)"),
    {.name = "freeze_projector", .type = T_BOOL, .off = offsetof(os_sft_args, freeze_encoder_projector),
     .help = "same as --freeze_encoder_projector"},
    B(freeze_group_decode_adapter, "freeze the group-decode adapter (default false)"),
    S(trainable_embed_rows, "embed_tokens/lm_head rows that train: all | new (special text + audio ids) | audio | none "
                            "(default all; none with --freeze_llm)"),
    P(cache_speech_features, "directory caching the frozen encoder's output per WAV (docs/speech.md; may differ per rank)"),
    {.name = "param_loss", .type = T_TERM, .help = "l2:COEF:PREFIX or dummy:PREFIX, loss terms over parameters (repeatable)"},
    N(ddp_timeout, T_F64, "[0,31536000]", "seconds a rank waits in one collective before the job ends with a report naming the "
                                      "ranks that did not arrive; 0 = wait forever, at most a year (default 1800, docs/operations.md)"),
    S(dump_grads, "write the first step's reduced gradients to this safetensors file"),
    P(dump_logits, "write rank 0's first micro-batch lm_head logits [B*L, V] to this safetensors file (rank 0's counts)"),
    // ms-swift / transformers flags: only the values whose meaning omnishard implements (docs/training.md)
    C(torch_dtype, "float32|fp32|bfloat16|bf16", "training precision: float32 (default), or bfloat16 mixed "
                                                 "precision: GEMMs on bf16 inputs with fp32 accumulation, fp32 "
                                                 "master weights, gradients and AdamW (docs/training.md)"),
    C(ddp_backend, "mpi", "collective backend (omnishard communicates over Open MPI)"),
    C(device, "cpu", "device to train on"),
    N(dataloader_num_workers, T_I64, "[0,0]", "data loader worker processes (samples are loaded in the training process)"),
    C(lazy_tokenize, "true|True", "SLAM-Omni text is tokenized when a sample is first used"),
    C(check_model, "false|False", "compare the model files with a model hub (never done here)"),
    C(report_to, "none", "metric sinks besides OUTPUT_DIR/logging.jsonl"),
};
#undef F
#undef STR
#undef XSTR
#undef S
#undef P
#undef C
#undef N
#undef B
#define NOPTS ((int)(sizeof opts / sizeof opts[0]))

// the choices "a|b|c" as "a, b or c"
static void choice_list(const char *choices, char *out, size_t n) {
    size_t k = 0;
    const char *last = strrchr(choices, '|');
    for (const char *c = choices; *c && k + 8 < n; c++) {
        if (*c != '|') out[k++] = *c;
        else k += (size_t)snprintf(out + k, n - k, c == last ? " or " : ", ");
    }
    out[k < n ? k : n - 1] = 0;
}

void os_sft_args_usage(FILE *f) {
    fprintf(f, "usage: omnishard sft --model DIR --dataset FILE --output_dir DIR [options]\n"
               "       mpirun -np N omnishard sft ... --deepspeed zero3\n\noptions (--name value or --name=value):\n");
    for (int i = 0; i < NOPTS; i++) {
        const opt *o = &opts[i];
        char extra[256] = "";
        if (o->range) snprintf(extra, sizeof extra, "; range %s", o->range);
        if (o->type == T_CHOICE) {
            char l[200];
            choice_list(o->choices, l, sizeof l);
            snprintf(extra, sizeof extra, "; supported: %s", l);
        }
        fprintf(f, "  --%-28s %s%s\n", o->name, o->help, extra);
    }
    os_sft_swift_defaults_usage(f);
}

static void defaults(os_sft_args *a) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < NOPTS; i++)   // a choice defaults to its first value (a static string: the table's)
        if (opts[i].type == T_CHOICE) {
            static char first[NOPTS][64];
            snprintf(first[i], sizeof first[i], "%.*s", (int)strcspn(opts[i].choices, "|"), opts[i].choices);
            *(const char **)((char *)a + opts[i].off) = first[i];
        }
    a->code_layer = -1, a->num_latency_tokens = -1, a->do_layershift = -1;
    a->num_train_epochs = 1, a->learning_rate = 1e-4, a->max_grad_norm = 1.0;
    a->adam_beta1 = 0.9, a->adam_beta2 = 0.999, a->adam_epsilon = 1e-8;
    a->per_device_train_batch_size = 1, a->gradient_accumulation_steps = 1;
    a->max_length = 2048, a->logging_steps = 1, a->save_steps = 500, a->seed = 42;
    a->gradient_checkpointing = 1;
    a->ddp_timeout = OS_DDP_TIMEOUT_DEFAULT;
    a->freeze_encoder = 1;
    a->target_modules = "all-linear";
    a->lora_rank = 8, a->lora_alpha = 32, a->lora_dropout = 0.05, a->merge_lora = 1;
}

// The ranges are those the option's consumer can represent (docs/training.md "Option ranges"): float for what
// AdamW and LoRA compute with (3.4e38), int for lengths and batch sizes, a year for --ddp_timeout.

// x within o's range ("[lo,hi)" etc.); -1 + message naming the option, the range and the value when not
static int in_range(const opt *o, double x, const char *v) {
    char lb, rb;
    double lo, hi;
    OS_ASSERT(o->range && sscanf(o->range, "%c%lf,%lf%c", &lb, &lo, &hi, &rb) == 4);   // every number has a range
    int ok = (lb == '[' ? x >= lo : x > lo) && (rb == ']' ? x <= hi : x < hi);
    return ok ? 0 : os_errf("--%s: expected a value in %s, got '%s'", o->name, o->range, v);
}

static int parse_weights(os_sft_args *a, const char *v) {
    a->n_loss_weights = 0;
    for (const char *s = v; *s;) {
        if (a->n_loss_weights > OS_MAX_G) return os_errf("--loss_weights: at most %d values", OS_MAX_G + 1);
        double x;
        const char *end;
        if (os_parse_decimal_prefix(s, &end, &x) < 0 || x < 0 || x > FLT_MAX || (*end && *end != ','))
            return os_errf("--loss_weights: expected comma-separated decimal numbers in [0,3.4e38], got '%s'", v);
        a->loss_weights[a->n_loss_weights++] = (float)x;
        s = *end == ',' ? end + 1 : end;
    }
    for (int i = 0; i < a->n_loss_weights; i++)
        if (a->loss_weights[i] > 0) return 0;
    return os_errf("--loss_weights: every weight is 0 in '%s' (nothing would train; give at least one weight > 0)", v);
}

static int parse_value(os_sft_args *a, const opt *o, const char *v) {
    void *dst = (char *)a + o->off;
    switch (o->type) {
    case T_STR: *(const char **)dst = v; return 0;
    case T_CHOICE:
        for (const char *c = o->choices; *c; c += strcspn(c, "|"), c += *c == '|') {
            size_t k = strcspn(c, "|");
            if (strlen(v) == k && !strncmp(c, v, k)) {
                *(const char **)dst = os_opts_canonical_choice(v);
                return 0;
            }
        }
        char l[200];
        choice_list(o->choices, l, sizeof l);
        return os_errf("--%s: '%s' is not supported (supported: %s)", o->name, v, l);
    case T_F64: {
        double x;
        if (os_parse_decimal(v, &x) < 0) return os_errf("--%s: expected a decimal number, got '%s'", o->name, v);
        *(double *)dst = x;
        return in_range(o, x, v);
    }
    case T_I64:
    case T_INT: {
        long long x;
        if (os_parse_decimal_int(v, o->type == T_INT ? INT_MIN : LLONG_MIN, o->type == T_INT ? INT_MAX : LLONG_MAX, &x) < 0)
            return os_errf("--%s: expected a decimal integer, got '%s'", o->name, v);
        if (o->type == T_I64) *(int64_t *)dst = x;
        else *(int *)dst = (int)x;
        return in_range(o, (double)x, v);
    }
    case T_BOOL:
        if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1")) *(int *)dst = 1;
        else if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0")) *(int *)dst = 0;
        else return os_errf("--%s: expected true or false, got '%s'", o->name, v);
        return 0;
    case T_STAGE:
        if (strncmp(v, "zero", 4) || v[4] < '0' || v[4] > '3' || v[5])
            return os_errf("--deepspeed: expected zero0, zero1, zero2 or zero3, got '%s'", v);
        a->zero_stage = v[4] - '0';
        return 0;
    case T_TERM:
        if (a->nterms >= OS_MAX_TERMS) return os_errf("--param_loss: at most %d terms", OS_MAX_TERMS);
        return os_param_term_parse(v, &a->terms[a->nterms++]);
    case T_WEIGHTS: return parse_weights(a, v);
    }
    return 0;
}

int os_sft_args_parse(os_sft_args *a, int argc, char **argv) {
    defaults(a);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return 1;
        if (strncmp(arg, "--", 2)) return os_errf("unexpected argument '%s' (options start with --)", arg);
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const opt *o = NULL;
        for (int k = 0; k < NOPTS; k++)
            if (strlen(opts[k].name) == nlen && !strncmp(opts[k].name, name, nlen)) o = &opts[k];
        if (!o) return os_errf("unknown option '--%.*s' (omnishard sft --help lists them)", (int)nlen, name);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return os_errf("option '--%s' needs a value", o->name);
        if (parse_value(a, o, v) < 0) return -1;
    }
    if (!a->model || !a->dataset || !a->output_dir)
        return os_errf("--model, --dataset and --output_dir are required (omnishard sft --help)");
    if (!a->freeze_encoder)
        return os_errf("--freeze_encoder false: training the speech encoder is not supported (it is frozen, as in the "
                       "reference recipe)");
    if (a->trainable_embed_rows && strcmp(a->trainable_embed_rows, "all") && strcmp(a->trainable_embed_rows, "new") &&
        strcmp(a->trainable_embed_rows, "audio") && strcmp(a->trainable_embed_rows, "none"))
        return os_errf("--trainable_embed_rows: expected all, new, audio or none, got '%s'", a->trainable_embed_rows);
    unsigned targets;
    if (os_lora_parse_targets(a->target_modules, &targets) < 0) return -1;
    const char *hb = getenv("OMNISHARD_HEAD_BALANCE");   // docs/operations.md; agreed on with the options
    a->head_balance = !hb || !*hb || !strcmp(hb, "1");
    if (!a->head_balance && strcmp(hb, "0"))
        return os_errf("OMNISHARD_HEAD_BALANCE: expected 1 (the head's rows move between ranks to even out its work, "
                       "the default) or 0 (they stay), got '%s'", hb);
    return os_alloc_huge_pages() < 0 ? -1 : 0;
}

int os_sft_args_count(void) { return NOPTS; }

// --target_modules as the modules it selects: all-linear, or the list in the model's order without repeats
static void target_text(const char *s, char *buf, size_t n) {
    unsigned t;
    if (os_lora_parse_targets(s, &t) < 0) return;   // (refused at parse time already)
    if (t == (1u << OS_LORA_N) - 1) {
        snprintf(buf, n, "all-linear");
        return;
    }
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < OS_LORA_N && k < n; i++)
        if (t >> i & 1) k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? "," : "", os_lora_module[i]);
}

int os_sft_args_value(const os_sft_args *a, int i, const char **name, char *buf, size_t n) {
    const opt *o = &opts[i];
    const void *src = (const char *)a + o->off;
    size_t k = 0;
    *name = o->name;
    buf[0] = 0;
    switch (o->type) {
    case T_STR:
    case T_CHOICE: {
        const char *s = *(const char *const *)src;
        snprintf(buf, n, "%s", s ? s : "(not given)");
        if (src == &a->target_modules && s) target_text(s, buf, n);
        break;
    }
    case T_F64: os_double_str(*(const double *)src, buf, n); break;
    case T_I64: snprintf(buf, n, "%lld", (long long)*(const int64_t *)src); break;
    case T_INT: snprintf(buf, n, "%d", *(const int *)src); break;
    case T_BOOL: {   // < 0: not given (the model directory decides)
        int v = *(const int *)src;
        snprintf(buf, n, "%s", v < 0 ? "(not given)" : v ? "true" : "false");
        break;
    }
    case T_STAGE: snprintf(buf, n, "zero%d", a->zero_stage); break;
    case T_TERM:
        for (int t = 0; t < a->nterms && k < n; t++) {
            const os_param_term *p = &a->terms[t];
            char c[32];
            if (p->kind == OS_TERM_L2)
                k += (size_t)snprintf(buf + k, n - k, "%sl2:%s:%s", t ? " " : "", os_float_str(p->coef, c, sizeof c), p->prefix);
            else k += (size_t)snprintf(buf + k, n - k, "%sdummy:%s", t ? " " : "", p->prefix);
        }
        if (!a->nterms) snprintf(buf, n, "(none)");
        break;
    case T_WEIGHTS:
        for (int t = 0; t < a->n_loss_weights && k < n; t++) {
            char w[32];
            k += (size_t)snprintf(buf + k, n - k, "%s%s", t ? "," : "", os_float_str(a->loss_weights[t], w, sizeof w));
        }
        if (!a->n_loss_weights) snprintf(buf, n, "(default)");
        break;
    }
    return !o->per_rank;
}
