#include "train/args.h"
#include "core/err.h"
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T_STR, T_F64, T_I64, T_INT, T_BOOL, T_STAGE, T_TERM, T_WEIGHTS, T_IGNORE };
typedef struct {
    const char *name;
    int type;
    size_t off;
    const char *help;
} opt;

#define O(n, t, h) {#n, t, offsetof(os_sft_args, n), h}
static const opt opts[] = {
    O(model, T_STR, "Hugging Face Qwen2 / SLAM-Omni model directory (required)"),
    O(dataset, T_STR, "training data: .jsonl (pretokenized or SLAM-Omni records) (required)"),
    O(output_dir, T_STR, "where logging.jsonl, checkpoints and the final model go (required)"),
    O(model_type, T_STR, "slam_omni (default) or qwen2 (plain causal LM)"),
    O(code_layer, T_INT, "audio code layers G of slam_omni (default 3, or slam_omni.json)"),
    O(num_latency_tokens, T_INT, "pad_a positions before the answer audio of every layer (default slam_omni.json's, else 0)"),
    O(do_layershift, T_BOOL, "each audio layer its own A vocabulary rows, id T+g*A+a, no adapter (default slam_omni.json's, else false)"),
    O(mask_equal_length_audio, T_BOOL, "the reference's mask of every audio label when text and audio have the same length (default false: trained)"),
    O(loss_weights, T_WEIGHTS, "text,audio0,..: loss weights (default 1/(G+1) each, the reference)"),
    O(num_train_epochs, T_F64, "epochs (default 1)"),
    O(max_steps, T_I64, "optimizer steps; overrides epochs when > 0"),
    O(per_device_train_batch_size, T_I64, "samples per rank per micro-batch (default 1)"),
    O(gradient_accumulation_steps, T_I64, "micro-batches per optimizer step (default 1)"),
    O(learning_rate, T_F64, "peak learning rate (default 1e-4)"),
    O(weight_decay, T_F64, "AdamW weight decay, not applied to biases and norms (default 0)"),
    O(adam_beta1, T_F64, "default 0.9"),
    O(adam_beta2, T_F64, "default 0.999"),
    O(adam_epsilon, T_F64, "default 1e-8"),
    O(max_grad_norm, T_F64, "global gradient-norm clipping, 0 = off (default 1)"),
    O(warmup_steps, T_I64, "linear warm-up steps (default 0)"),
    O(warmup_ratio, T_F64, "warm-up as a fraction of all steps when warmup_steps is 0"),
    O(lr_scheduler_type, T_STR, "constant | constant_with_warmup | linear | cosine (default linear)"),
    O(max_length, T_I64, "longest sample in tokens (default 2048)"),
    O(truncation_strategy, T_STR, "right (keep the start, default) | left | delete (skip, counted)"),
    O(logging_steps, T_I64, "log every N steps (default 1)"),
    O(save_steps, T_I64, "checkpoint every N steps, 0 = only at the end (default 500)"),
    O(eval_steps, T_I64, "evaluate every N steps (needs val_dataset or split_dataset_ratio)"),
    O(val_dataset, T_STR, "evaluation data"),
    O(split_dataset_ratio, T_F64, "fraction of dataset held out for evaluation (default 0)"),
    O(new_rows_init, T_STR, "embedding/lm_head rows the checkpoint lacks (vocabulary resize): mean_resizing (default, "
                            "transformers >= 4.46: N(mean, 1e-9 cov) of its rows) | normal (N(0, 0.02))"),
    O(seed, T_I64, "data order and new-parameter initialisation (default 42)"),
    O(zero_stage, T_INT, "ZeRO stage 0-3 (default 0 single rank; --deepspeed zero3 also works)"),
    {"deepspeed", T_STAGE, 0, "zero0 | zero1 | zero2 | zero3 (same as --zero_stage)"},
    O(gradient_checkpointing, T_BOOL, "recompute each layer in the backward (default true)"),
    O(resume_from_checkpoint, T_STR, "checkpoint directory to continue from"),
    O(save_only_model, T_BOOL, "checkpoints without optimizer state (default false)"),
    O(speech_encoder, T_STR, "Hugging Face Whisper directory for speech questions"),
    O(freeze_llm, T_BOOL, "freeze the LLM: layers, final norm, embed_tokens, lm_head (default false)"),
    O(freeze_encoder, T_BOOL, "the speech encoder is always frozen (default true; false is refused)"),
    O(freeze_encoder_projector, T_BOOL, "freeze the speech projector (default false)"),
    {"freeze_projector", T_BOOL, offsetof(os_sft_args, freeze_encoder_projector), "same as --freeze_encoder_projector"},
    O(freeze_group_decode_adapter, T_BOOL, "freeze the group-decode adapter (default false)"),
    O(trainable_embed_rows, T_STR, "embed_tokens/lm_head rows that train: all | new (special text + audio ids) | "
                                   "audio | none (default all; none with --freeze_llm)"),
    O(cache_speech_features, T_STR, "directory caching the frozen encoder's output per WAV (docs/speech.md)"),
    {"param_loss", T_TERM, 0, "l2:COEF:PREFIX or dummy:PREFIX, loss terms over parameters (repeatable)"},
    O(ddp_timeout, T_F64, "seconds a rank waits in one collective before the job ends with a report naming the ranks "
                          "that did not arrive; 0 = wait forever (default 1800, docs/operations.md)"),
    O(dump_grads, T_STR, "write the first step's reduced gradients to this safetensors file"),
    O(dump_logits, T_STR, "write rank 0's first micro-batch lm_head logits [B*L, V] to this safetensors file"),
    // accepted for ms-swift compatibility, without effect here
    {"train_type", T_IGNORE, 0, "full (the only type)"},
    {"torch_dtype", T_IGNORE, 0, "float32 (the only type)"},
    {"ddp_backend", T_IGNORE, 0, ""}, {"device", T_IGNORE, 0, ""}, {"dataloader_num_workers", T_IGNORE, 0, ""},
    {"lazy_tokenize", T_IGNORE, 0, ""}, {"check_model", T_IGNORE, 0, ""}, {"report_to", T_IGNORE, 0, ""},
};
#undef O

void os_sft_args_usage(FILE *f) {
    fprintf(f, "usage: omnishard sft --model DIR --dataset FILE --output_dir DIR [options]\n"
               "       mpirun -np N omnishard sft ... --deepspeed zero3\n\noptions (--name value or --name=value):\n");
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (opts[i].help[0]) fprintf(f, "  --%-28s %s\n", opts[i].name, opts[i].help);
}

static void defaults(os_sft_args *a) {
    memset(a, 0, sizeof *a);
    a->model_type = "slam_omni";
    a->code_layer = -1, a->num_latency_tokens = -1, a->do_layershift = -1;
    a->num_train_epochs = 1, a->learning_rate = 1e-4, a->max_grad_norm = 1.0;
    a->adam_beta1 = 0.9, a->adam_beta2 = 0.999, a->adam_epsilon = 1e-8;
    a->per_device_train_batch_size = 1, a->gradient_accumulation_steps = 1;
    a->lr_scheduler_type = "linear", a->truncation_strategy = "right", a->new_rows_init = "mean_resizing";
    a->max_length = 2048, a->logging_steps = 1, a->save_steps = 500, a->seed = 42;
    a->gradient_checkpointing = 1;
    a->ddp_timeout = OS_DDP_TIMEOUT_DEFAULT;
    a->freeze_encoder = 1;
}

static int parse_value(os_sft_args *a, const opt *o, const char *v) {
    char *end;
    void *dst = (char *)a + o->off;
    errno = 0;
    switch (o->type) {
    case T_STR: *(const char **)dst = v; return 0;
    case T_F64: {
        double x = strtod(v, &end);
        if (*end || end == v || errno || !isfinite(x)) return os_errf("--%s: expected a number, got '%s'", o->name, v);
        *(double *)dst = x;
        return 0;
    }
    case T_I64:
    case T_INT: {
        long long x = strtoll(v, &end, 10);
        if (*end || end == v || errno || x < 0 || (o->type == T_INT && x > 1000000))
            return os_errf("--%s: expected a non-negative integer, got '%s'", o->name, v);
        if (o->type == T_I64) *(int64_t *)dst = x;
        else *(int *)dst = (int)x;
        return 0;
    }
    case T_BOOL:
        if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1")) *(int *)dst = 1;
        else if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0")) *(int *)dst = 0;
        else return os_errf("--%s: expected true or false, got '%s'", o->name, v);
        return 0;
    case T_STAGE:
        if (strncmp(v, "zero", 4) || v[4] < '0' || v[4] > '3' || (v[5] && strcmp(v + 5, "_offload") == 0) || v[5])
            return os_errf("--deepspeed: expected zero0, zero1, zero2 or zero3, got '%s'", v);
        a->zero_stage = v[4] - '0';
        return 0;
    case T_TERM:
        if (a->nterms >= OS_MAX_TERMS) return os_errf("--param_loss: at most %d terms", OS_MAX_TERMS);
        return os_param_term_parse(v, &a->terms[a->nterms++]);
    case T_WEIGHTS: {
        a->n_loss_weights = 0;
        const char *s = v;
        while (*s) {
            if (a->n_loss_weights > OS_MAX_G) return os_errf("--loss_weights: at most %d values", OS_MAX_G + 1);
            double x = strtod(s, &end);
            if (end == s || !isfinite(x) || x < 0) return os_errf("--loss_weights: expected comma-separated non-negative numbers, got '%s'", v);
            a->loss_weights[a->n_loss_weights++] = (float)x;
            s = *end == ',' ? end + 1 : end;
            if (*end && *end != ',') return os_errf("--loss_weights: expected comma-separated numbers, got '%s'", v);
        }
        return 0;
    }
    default: return 0;
    }
}

int os_sft_args_parse(os_sft_args *a, int argc, char **argv) {
    defaults(a);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            os_sft_args_usage(stdout);
            return 1;
        }
        if (strncmp(arg, "--", 2)) return os_errf("unexpected argument '%s' (options start with --)", arg);
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const opt *o = NULL;
        for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
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
    if (a->zero_stage > 3) return os_errf("--zero_stage: expected 0-3, got %d", a->zero_stage);
    if (strcmp(a->model_type, "slam_omni") && strcmp(a->model_type, "qwen2"))
        return os_errf("--model_type: expected slam_omni or qwen2, got '%s'", a->model_type);
    const char *sch[] = {"constant", "constant_with_warmup", "linear", "cosine"};
    int ok = 0;
    for (int k = 0; k < 4; k++) ok |= !strcmp(a->lr_scheduler_type, sch[k]);
    if (!ok) return os_errf("--lr_scheduler_type: expected constant, constant_with_warmup, linear or cosine, got '%s'", a->lr_scheduler_type);
    if (strcmp(a->truncation_strategy, "right") && strcmp(a->truncation_strategy, "left") && strcmp(a->truncation_strategy, "delete"))
        return os_errf("--truncation_strategy: expected right, left or delete, got '%s'", a->truncation_strategy);
    if (strcmp(a->new_rows_init, "mean_resizing") && strcmp(a->new_rows_init, "normal"))
        return os_errf("--new_rows_init: expected mean_resizing or normal, got '%s'", a->new_rows_init);
    if (a->ddp_timeout < 0) return os_errf("--ddp_timeout: expected seconds >= 0 (0 = no deadline), got %g", a->ddp_timeout);
    if (a->per_device_train_batch_size < 1 || a->gradient_accumulation_steps < 1 || a->max_length < 2)
        return os_errf("--per_device_train_batch_size and --gradient_accumulation_steps must be >= 1, --max_length >= 2");
    return 0;
}

int os_sft_args_fingerprint(const os_sft_args *a, const char **fields, char (*values)[256], int max) {
    int n = 0;
#define FP(name, fmt, val) \
    if (n < max) fields[n] = name, snprintf(values[n], 256, fmt, val), n++;
    FP("--model", "%s", a->model);
    FP("--dataset", "%s", a->dataset);
    FP("--output_dir", "%s", a->output_dir);
    FP("--model_type", "%s", a->model_type);
    FP("--code_layer", "%d", a->code_layer);
    FP("--num_latency_tokens", "%d", a->num_latency_tokens);
    FP("--do_layershift", "%d", a->do_layershift);
    FP("--mask_equal_length_audio", "%d", a->mask_equal_length_audio);
    FP("--zero_stage", "%d", a->zero_stage);
    FP("--num_train_epochs", "%.17g", a->num_train_epochs);
    FP("--max_steps", "%lld", (long long)a->max_steps);
    FP("--per_device_train_batch_size", "%lld", (long long)a->per_device_train_batch_size);
    FP("--gradient_accumulation_steps", "%lld", (long long)a->gradient_accumulation_steps);
    FP("--learning_rate", "%.17g", a->learning_rate);
    FP("--weight_decay", "%.17g", a->weight_decay);
    FP("--max_grad_norm", "%.17g", a->max_grad_norm);
    FP("--warmup_steps", "%lld", (long long)a->warmup_steps);
    FP("--lr_scheduler_type", "%s", a->lr_scheduler_type);
    FP("--max_length", "%lld", (long long)a->max_length);
    FP("--save_steps", "%lld", (long long)a->save_steps);
    FP("--seed", "%lld", (long long)a->seed);
    FP("--new_rows_init", "%s", a->new_rows_init);
    FP("--gradient_checkpointing", "%d", a->gradient_checkpointing);
    FP("--speech_encoder", "%s", a->speech_encoder ? a->speech_encoder : "");
    FP("--ddp_timeout", "%.17g", a->ddp_timeout);
    FP("--nterms", "%d", a->nterms);
    FP("--freeze", "%d", a->freeze_llm * 4 + a->freeze_encoder_projector * 2 + a->freeze_group_decode_adapter);
    FP("--trainable_embed_rows", "%s", a->trainable_embed_rows ? a->trainable_embed_rows : "");
    FP("--resume_from_checkpoint", "%s", a->resume_from_checkpoint ? a->resume_from_checkpoint : "");
#undef FP
    return n;
}
