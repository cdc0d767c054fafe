// The sft options table: parsing, ranges and allowed values, --help, and the values the ranks agree on at start.
#include "train/args.h"
#include "train/swift_defaults.h"
#include "core/alloc.h"
#include "core/device.h"
#include "core/err.h"
#include "core/numtext.h"
#include "core/opts.h"
#include "model/omni.h"
#include "persist/export.h"
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XSTR(x) #x
#define STR(x) XSTR(x)
// each option: its section s of os_sft_args and its field n there (the option's name); --help lists it under s
#define IN(s, f) .off = offsetof(os_sft_args, s.f), .section = #s
#define F(s, n) .name = #n, IN(s, n)
#define S(s, n, h) {F(s, n), .type = OS_OPT_STR, .help = h}
#define D(s, n, mv, h) {F(s, n), .type = OS_OPT_STR, .metavar = mv, .help = h}
#define Q(s, n, mv, h) {F(s, n), .type = OS_OPT_STR, .metavar = mv, .help = h, .per_rank = 1}
#define C(s, n, ch, h) {F(s, n), .type = OS_OPT_CHOICE, .choices = ch, .help = h}
#define N(s, n, t, r, h) {F(s, n), .type = OS_OPT_##t, .range = r, .help = h}
#define B(s, n, h) {F(s, n), .type = OS_OPT_BOOL, .help = h}
#define X(s, n, h) {F(s, n), .type = OS_OPT_CUSTOM, .parse = parse_##n, .show = show_##n, .help = h}
#define L(s, n, h) {F(s, n), .type = OS_OPT_CUSTOM, .parse = parse_##n, .show = show_##n, .list = 1, .metavar = "PATH[#N] ..", .help = h}
static int parse_dataset(void *obj, const char *v);
static void show_dataset(const void *obj, char *buf, size_t n);
static int parse_val_dataset(void *obj, const char *v);
static void show_val_dataset(const void *obj, char *buf, size_t n);
static int parse_loss_weights(void *obj, const char *v);
static void show_loss_weights(const void *obj, char *buf, size_t n);
static int parse_param_loss(void *obj, const char *v);
static void show_param_loss(const void *obj, char *buf, size_t n);
static int parse_target_modules(void *obj, const char *v);
static int parse_report_to(void *obj, const char *v);
static int parse_device(void *obj, const char *v);
static void show_device(const void *obj, char *buf, size_t n);
static int parse_deepspeed(void *obj, const char *v);
static void show_deepspeed(const void *obj, char *buf, size_t n);
static void show_report_to(const void *obj, char *buf, size_t n);
static void show_target_modules(const void *obj, char *buf, size_t n);
static int parse_max_shard_size(void *obj, const char *v);
static void show_max_shard_size(const void *obj, char *buf, size_t n);
static const os_opt opts[] = {
    D(model, model, "DIR", "Hugging Face Qwen2 / SLAM-Omni model directory (required)"),
    L(data, dataset, "training data (required): one or more files (.jsonl/.json: pretokenized or SLAM-Omni records) or "
               "folders omnishard convert wrote, mixed; PATH#N takes N samples of PATH (repeats it when N exceeds it)"),
    D(checkpoint, output_dir, "DIR", "where logging.jsonl, checkpoints and the final model go (required)"),
    B(checkpoint, overwrite_output_dir, "a --output_dir that holds an earlier run: remove the files its omnishard-files.json proves "
                            "omnishard wrote (logging.jsonl, args.json, checkpoint-N, final_model, event files) first, "
                            "keeping everything else; without it such a directory is refused, unless the run resumes a "
                            "checkpoint of it (default false)"),
    B(checkpoint, add_version, "write into a new OUTPUT_DIR/vN-YYYYMMDD-HHMMSS run folder, as ms-swift (default false, ms-swift's "
                   "true: omnishard writes where --output_dir says)"),
    C(model, model_type, "slam_omni|qwen2", "slam_omni (a Qwen2 LLM with G audio layers) or qwen2 (plain causal LM)"),
    N(model, code_layer, INT, "[1," STR(OS_MAX_G) "]", "audio code layers G of slam_omni (default 3, or slam_omni.json)"),
    N(model, num_latency_tokens, INT, "[0,1048576]", "pad_a positions before the answer audio of every layer (default slam_omni.json's, else 0)"),
    B(model, do_layershift, "each audio layer its own A vocabulary rows, id T+g*A+a, no adapter (default slam_omni.json's, else false)"),
    B(model, mask_equal_length_audio, "the reference's mask of every audio label when text and audio have the same length (default false: trained)"),
    {.name = "loss_weights", IN(model, loss_weights), .type = OS_OPT_CUSTOM, .parse = parse_loss_weights, .show = show_loss_weights,
     .metavar = "W,W,..", .help = "text,audio0,..: loss weights >= 0 (default 1/(G+1) each, the reference)"},
    N(training, num_train_epochs, F64, "(0,1e9]", "epochs (default 1)"),
    {F(training, max_steps), .type = OS_OPT_I64, .range = "[0,inf)", .unset = "-1",
     .help = "optimizer steps; overrides epochs when > 0 (0 or -1, Hugging Face's 'not set': the epochs decide)"},
    N(training, per_device_train_batch_size, I64, "[1,2147483647]", "samples per rank per micro-batch (default 1)"),
    N(training, gradient_accumulation_steps, I64, "[1,2147483647]", "micro-batches per optimizer step (default 1)"),
    N(training, learning_rate, F64, "[0,3.4e38]", "peak learning rate (default 1e-4)"),
    N(training, weight_decay, F64, "[0,3.4e38]", "AdamW weight decay, not applied to biases and norms (default 0)"),
    N(training, adam_beta1, F64, "[0,1)", "default 0.9"),
    N(training, adam_beta2, F64, "[0,1)", "default 0.999"),
    N(training, adam_epsilon, F64, "[0,3.4e38]", "default 1e-8"),
    N(training, max_grad_norm, F64, "[0,3.4e38]", "global gradient-norm clipping, 0 = off (default 1)"),
    N(training, warmup_steps, I64, "[0,inf)", "linear warm-up steps (default 0)"),
    N(training, warmup_ratio, F64, "[0,1)", "warm-up as a fraction of all steps when warmup_steps is 0 (default 0)"),
    C(training, lr_scheduler_type, "linear|constant|constant_with_warmup|cosine", "learning-rate schedule (default linear)"),
    N(data, max_length, I64, "[2,2147483647]", "longest sample in tokens (default 2048); with --packing, longest packed row"),
    B(data, packing, "pack the training samples into rows of up to --max_length tokens (attention and positions per "
               "sample, losses per sample as unpacked; --per_device_train_batch_size counts rows; default false; "
               "docs/dataset.md \"Packing\")"),
    C(data, truncation_strategy, "right|left|delete", "right keeps the start (default), left the end, delete skips (counted)"),
    N(logging, logging_steps, I64, "[1,inf)", "log every N steps, and the last; loss and accuracies are the window's mean, as "
                                     "transformers' Trainer (default 1)"),
    N(checkpoint, save_steps, I64, "[0,inf)", "checkpoint every N steps, 0 = only at the end (default 500)"),
    N(checkpoint, save_total_limit, I64, "[0,inf)", "keep the newest N checkpoints (and the best by eval_loss), 0 = all (default 0)"),
    N(training, eval_steps, I64, "[0,inf)", "evaluate every N steps, 0 = at save_steps (needs val_dataset or split_dataset_ratio)"),
    L(data, val_dataset, "evaluation data: one or more files or folders, PATH#N as --dataset"),
    N(data, split_dataset_ratio, F64, "[0,1)", "fraction of dataset held out for evaluation (default 0)"),
    C(model, new_rows_init, "mean_resizing|normal", "embedding/lm_head rows the checkpoint lacks (vocabulary resize): "
                                             "mean_resizing (default, transformers >= 4.46: N(mean, 1e-9 cov) of its rows) "
                                             "or normal (N(0, 0.02))"),
    N(training, seed, I64, "[0,inf)", "data order and new-parameter initialisation (default 42)"),
    N(parallelism, zero_stage, INT, "[0,3]", "ZeRO stage (default 0; --deepspeed zero3 also works)"),
    {.name = "deepspeed", IN(parallelism, deepspeed_file), .type = OS_OPT_CUSTOM, .parse = parse_deepspeed, .show = show_deepspeed, .metavar = "CONFIG",
     .help = "zero0 | zero1 | zero2 | zero3 (same as --zero_stage; ms-swift's default-zero2 | default-zero3 too), or a "
             "DeepSpeed JSON config file (docs/training.md \"DeepSpeed config files\")"},
    B(training, gradient_checkpointing, "recompute each layer in the backward (default true)"),
    D(checkpoint, resume_from_checkpoint, "DIR|true", "checkpoint directory to continue from; true: the latest complete checkpoint of "
                              "--output_dir; a run's output directory: its latest complete checkpoint; false: none"),
    B(checkpoint, resume_override_config, "resume although dataset, seed, max_length, truncation, split, model_type, "
                              "code_layer or loss weights differ from the checkpoint's run (default false)"),
    B(checkpoint, save_only_model, "checkpoints without optimizer state (default false)"),
    B(checkpoint, resume_only_model, "with --resume_from_checkpoint: load the checkpoint's parameters only; the AdamW moments start "
                         "from zero, while the step, the data position and the schedule continue (default false)"),
    C(checkpoint, save_strategy, "steps|epoch|no", "when checkpoints are written: steps (every --save_steps, and at the end), "
                                       "epoch (where each epoch ends, and at the end) or no (none: final_model only)"),
    C(training, eval_strategy, "steps|epoch|no", "when the evaluation data is evaluated: steps (every --eval_steps, and at the "
                                       "end), epoch (where each epoch ends, and at the end) or no (never)"),
    S(data, system, "the system prompt of every SLAM-Omni record without its own system_prompt field (default: the task's; "
              "docs/dataset.md)"),
    C(model, attn_impl, "sdpa|eager|flash_attn|flash_attention_2", "attention: sdpa and eager name omnishard's one exact "
                                                            "softmax attention (every device); flash_attn is refused"),
    D(model, speech_encoder, "DIR", "Hugging Face Whisper directory for speech questions"),
    C(model, train_type, "full|lora", "full (default) or lora: the LLM frozen, LoRA adapters on its linear layers (docs/training.md)"),
    N(model, lora_rank, INT, "[1,4096]", "LoRA rank r (default 8)"),
    N(model, lora_alpha, F64, "(0,3.4e38]", "LoRA alpha: the update is scaled by alpha / r (default 32)"),
    N(model, lora_dropout, F64, "[0,1)", "dropout on the LoRA input (default 0.05; counter-RNG masks, not PyTorch's)"),
    X(model, target_modules, "LoRA targets: all-linear (default) or a list of q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"),
    B(checkpoint, merge_lora, "final_model with LoRA merged (default true) or base + PEFT adapter directory final_model/lora_adapter"),
    C(checkpoint, save_dtype, "auto|float32|fp32|bfloat16|bf16|float16|fp16",
      "dtype of the saved models (final_model, each checkpoint's model.safetensors): auto (default) the --model "
      "config's torch_dtype, as ms-swift; the fp32 weights rounded to nearest even (docs/training.md \"Saved models\")"),
    X(checkpoint, max_shard_size, "a saved model.safetensors above this size is split into model-0000K-of-0000N.safetensors with "
                      "its index, as transformers (default 5GB; 500MB, 2GiB, or bytes)"),
    B(checkpoint, save_consolidated, "each checkpoint-N also holds the whole model as transformers and PEFT load it (default true; "
                         "false keeps only the rank files, for large runs; docs/training.md \"Saved models\")"),
    B(model, freeze_llm, "freeze the LLM: layers, final norm, embed_tokens, lm_head (default false)"),
    B(model, freeze_encoder, "the speech encoder is always frozen (default true; false is refused)"),
    B(model, freeze_encoder_projector, "freeze the speech projector (default false)"),
    {.name = "freeze_projector", .type = OS_OPT_BOOL, IN(model, freeze_encoder_projector),
     .help = "same as --freeze_encoder_projector"},
    B(model, freeze_group_decode_adapter, "freeze the group-decode adapter (default false)"),
    D(model, trainable_embed_rows, "ROWS", "embed_tokens/lm_head rows that train: all | new (special text + audio ids) | audio | none "
                            "(default all; none with --freeze_llm)"),
    Q(data, cache_speech_features, "DIR", "directory caching the frozen encoder's output per WAV (docs/speech.md; may differ per rank)"),
    {.name = "param_loss", IN(training, terms), .type = OS_OPT_CUSTOM, .parse = parse_param_loss, .show = show_param_loss,
     .metavar = "TERM", .help = "l2:COEF:PREFIX or dummy:PREFIX, loss terms over parameters (repeatable)"},
    B(parallelism, head_balance, "the head's rows move between ranks to even out its work (default true on the CPU, false on a "
                    "device such as --device cuda; docs/training.md \"Balancing the head across ranks\")"),
    N(parallelism, ddp_timeout, F64, "[0,31536000]", "seconds a rank waits in one collective before the job ends with a report naming the "
                                      "ranks that did not arrive; 0 = wait forever, at most a year (default 1800, docs/operations.md)"),
    D(debug, dump_grads, "FILE", "write the first step's reduced gradients to this safetensors file"),
    Q(debug, dump_logits, "FILE", "write rank 0's first micro-batch lm_head logits [B*L, V] to this safetensors file (rank 0's counts)"),
    // ms-swift / transformers flags: only the values whose meaning omnishard implements (docs/training.md)
    {F(training, torch_dtype), .type = OS_OPT_CHOICE, .choices = "float32|fp32|bfloat16|bf16", .unset = "auto", .help =
                                                 "training precision: auto (default) the model's own, "
                                                 "as ms-swift: bfloat16 when its config.json's torch_dtype is, else "
                                                 "float32 (a start-up line says which and why); float32; or bfloat16 "
                                                 "mixed precision: GEMMs on bf16 inputs with fp32 accumulation, fp32 "
                                                 "master weights, gradients and AdamW (docs/training.md)"},
    C(parallelism, ddp_backend, "mpi", "collective backend (omnishard communicates over Open MPI)"),
    X(device, device, "cpu (default), cuda (each rank the GPU of its local rank among those visible) or cuda:N; cuda needs "
              "a binary built with make CUDA=1 (docs/operations.md \"GPUs\"); guard or guard:lax: the test backend "
              "(docs/design.md \"The guard backend\")"),
    B(device, tf32, "--device cuda: fp32 products on the tensor cores in TF32 (inputs rounded to 10-bit mantissas: faster, not "
            "exact; default false: exact fp32)"),
    C(data, lazy_tokenize, "true|True", "SLAM-Omni text is tokenized when a sample is first used"),
    C(model, check_model, "false|False", "compare the model files with a model hub (never done here)"),
    X(logging, report_to, "metric sinks besides OUTPUT_DIR/logging.jsonl: none (default), tensorboard or all (TensorBoard event "
                 "files under --logging_dir); wandb is refused (it needs a network)"),
    S(logging, logging_dir, "folder of the TensorBoard event files (default OUTPUT_DIR/runs, as ms-swift)"),
    B(data, dataset_shuffle, "the samples of several --dataset files (or PATH#N) in one order keyed by --data_seed, else "
                       "file after file (default true, ms-swift's; one whole file is never reordered: the epochs are)"),
    {F(data, data_seed), .type = OS_OPT_I64, .range = "[0,inf)", .unset = "-1",
     .help = "seed of the data: PATH#N sampling, mixing, --split_dataset_ratio and the epochs' order (default --seed)"},
};
#undef F
#undef IN
#undef STR
#undef XSTR
#undef S
#undef D
#undef Q
#undef C
#undef N
#undef B
#undef X
#undef L
#define NOPTS ((int)(sizeof opts / sizeof opts[0]))

static const char USAGE[] = "usage: omnishard sft --model DIR --dataset FILE --output_dir DIR [options]\n"
                            "       mpirun -np N omnishard sft ... --deepspeed zero3\n";

// the sections in the order of os_sft_args (args.h), as --help lists them
static const os_opt_section sections[] = {
    {"model", "the model and what is built into it (docs/training.md)"},
    {"data", "the samples (docs/dataset.md)"},
    {"training", "the optimisation: steps, batch, AdamW, schedule, precision, evaluation"},
    {"checkpoint", "the output directory, checkpoints, resume, saved models (docs/operations.md)"},
    {"parallelism", "the ranks: ZeRO stage, collectives"},
    {"logging", "what is logged besides logging.jsonl"},
    {"device", "the backend"},
    {"debug", "test hooks and dumps"},
};
#define NSECTIONS ((int)(sizeof sections / sizeof sections[0]))

static const os_opt_cmd *command(os_sft_args *a) {
    static os_opt_group g = {"options", opts, NOPTS, NULL, sections, NSECTIONS};
    static unsigned char *given[1];
    static os_opt_cmd c = {.command = "sft", .usage = USAGE, .groups = &g, .ngroups = 1, .given = given};
    _Static_assert(NOPTS <= OS_SFT_MAX_OPTS, "os_sft_args.given holds a flag per option");
    c.known = os_sft_swift_known(&c.nknown);   // ms-swift's options omnishard does not have
    OS_ASSERT(c.nknown <= OS_SFT_KNOWN_MAX);
    g.obj = a, given[0] = a ? a->given : NULL, c.known_given = a ? a->known_given : NULL;
    return &c;
}

void os_sft_args_usage(FILE *f) {
    os_opts_usage(command(NULL), f);
    os_sft_swift_defaults_usage(f);
}

const os_opt *os_sft_options(int *n) {
    *n = NOPTS;
    return opts;
}

const os_opt_section *os_sft_sections(int *n) {
    *n = NSECTIONS;
    return sections;
}

void os_sft_args_defaults(os_sft_args *a) {
    memset(a, 0, sizeof *a);
    os_opts_defaults(opts, NOPTS, a);   // a choice: its first value
    a->model.code_layer = -1, a->model.num_latency_tokens = -1, a->model.do_layershift = -1;
    a->training.num_train_epochs = 1, a->training.learning_rate = 1e-4, a->training.max_grad_norm = 1.0;
    a->training.adam_beta1 = 0.9, a->training.adam_beta2 = 0.999, a->training.adam_epsilon = 1e-8;
    a->training.per_device_train_batch_size = 1, a->training.gradient_accumulation_steps = 1;
    a->data.max_length = 2048, a->logging.logging_steps = 1, a->checkpoint.save_steps = 500, a->training.seed = 42;
    a->training.gradient_checkpointing = 1;
    a->parallelism.ddp_timeout = OS_DDP_TIMEOUT_DEFAULT;
    a->model.freeze_encoder = 1;
    a->model.target_modules = "all-linear", a->logging.report_to = "none", a->device.device = "cpu";
    a->model.lora_rank = 8, a->model.lora_alpha = 32, a->model.lora_dropout = 0.05, a->checkpoint.merge_lora = 1;
    a->checkpoint.max_shard_size = OS_SHARD_DEFAULT, a->checkpoint.save_consolidated = 1;
    a->parallelism.head_balance = -1;   // not given: decided by the backend (trainer_open)
    a->training.torch_dtype = "auto";   // the model's own, settled before the device opens (train/dtype_default.h)
    a->data.dataset_shuffle = 1, a->data.data_seed = -1;
}

static int parse_max_shard_size(void *obj, const char *v) { return os_export_shard_size(v, &((os_sft_args *)obj)->checkpoint.max_shard_size); }

static void show_max_shard_size(const void *obj, char *buf, size_t n) {
    snprintf(buf, n, "%lld", (long long)((const os_sft_args *)obj)->checkpoint.max_shard_size);
}

// a word of --dataset / --val_dataset added to *list (NULL: a new occurrence, the list emptied); #N checked here
static int list_add(const char **list, int *n, const char **first, const char *name, const char *v) {
    if (!v) {
        *n = 0, *first = NULL;
        return 0;
    }
    if (*n == OS_MAX_SOURCES) return os_errf("--%s: at most %d files", name, OS_MAX_SOURCES);
    char *path;
    int64_t sample;
    if (os_data_source_parse(v, &path, &sample) < 0) return -1;
    os_free(path);
    list[(*n)++] = v;
    *first = list[0];
    return 0;
}

static int parse_dataset(void *obj, const char *v) {
    os_sft_args *a = obj;
    return list_add(a->data.datasets, &a->data.ndatasets, &a->data.dataset, "dataset", v);
}

static int parse_val_dataset(void *obj, const char *v) {
    os_sft_args *a = obj;
    return list_add(a->data.val_datasets, &a->data.nval_datasets, &a->data.val_dataset, "val_dataset", v);
}

// the list as given, words joined by a space
static void show_list(const char *const *list, int n, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k < size; i++) k += (size_t)snprintf(buf + k, size - k, "%s%s", i ? " " : "", list[i]);
    if (!n) snprintf(buf, size, "(not given)");
}

static void show_dataset(const void *obj, char *buf, size_t n) {
    const os_sft_args *a = obj;
    show_list(a->data.datasets, a->data.ndatasets, buf, n);
}

static void show_val_dataset(const void *obj, char *buf, size_t n) {
    const os_sft_args *a = obj;
    show_list(a->data.val_datasets, a->data.nval_datasets, buf, n);
}

// The ranges are those the option's consumer can represent (docs/training.md "Option ranges"): float for what
// AdamW and LoRA compute with (3.4e38), int for lengths and batch sizes, a year for --ddp_timeout.

static int parse_loss_weights(void *obj, const char *v) {
    os_sft_args *a = obj;
    a->model.n_loss_weights = 0;
    for (const char *s = v; *s;) {
        if (a->model.n_loss_weights > OS_MAX_G) return os_errf("--loss_weights: at most %d values", OS_MAX_G + 1);
        double x;
        const char *end;
        if (os_parse_decimal_prefix(s, &end, &x) < 0 || x < 0 || x > FLT_MAX || (*end && *end != ','))
            return os_errf("--loss_weights: expected comma-separated decimal numbers in [0,3.4e38], got '%s'", v);
        a->model.loss_weights[a->model.n_loss_weights++] = (float)x;
        s = *end == ',' ? end + 1 : end;
    }
    for (int i = 0; i < a->model.n_loss_weights; i++)
        if (a->model.loss_weights[i] > 0) return 0;
    return os_errf("--loss_weights: every weight is 0 in '%s' (nothing would train; give at least one weight > 0)", v);
}

static int parse_param_loss(void *obj, const char *v) {
    os_sft_args *a = obj;
    if (a->training.nterms >= OS_MAX_TERMS) return os_errf("--param_loss: at most %d terms", OS_MAX_TERMS);
    return os_param_term_parse(v, &a->training.terms[a->training.nterms++]);
}

static int parse_target_modules(void *obj, const char *v) {
    unsigned targets;
    ((os_sft_args *)obj)->model.target_modules = v;
    return os_lora_parse_targets(v, &targets);
}

// --deepspeed: a ZeRO stage by name (ms-swift's zeroN and its older default-zeroN), or a DeepSpeed JSON file read
// once the other options are known (os_ds_config_apply, called by omnishard sft)
static int parse_deepspeed(void *obj, const char *v) {
    os_sft_args *a = obj;
    a->parallelism.deepspeed_file = NULL;
    if (!strncmp(v, "zero", 4) && v[4] >= '0' && v[4] <= '3' && !v[5]) return a->parallelism.zero_stage = v[4] - '0', 0;
    if (!strcmp(v, "default-zero2") || !strcmp(v, "default-zero3")) return a->parallelism.zero_stage = v[12] - '0', 0;
    if (!strncmp(v, "zero", 4) && strstr(v, "offload") && !strchr(v, '/') && !strstr(v, ".json"))
        return os_errf("--deepspeed %s: offloading is not implemented; omnishard keeps parameters, gradients and AdamW "
                       "state in the backend's memory (the host's with --device cpu), sharded over the ranks: use "
                       "zero2 or zero3", v);
    size_t n = strlen(v);
    if (n < 5 || strcmp(v + n - 5, ".json")) {
        FILE *f = fopen(v, "rb");
        if (!f) return os_errf("--deepspeed: expected zero0, zero1, zero2, zero3, default-zero2, default-zero3 or a DeepSpeed "
                               "JSON config file, got '%s'", v);
        fclose(f);
    }
    a->parallelism.deepspeed_file = v;
    return 0;
}

static void show_deepspeed(const void *obj, char *buf, size_t n) {
    const os_sft_args *a = obj;
    if (a->parallelism.deepspeed_file) snprintf(buf, n, "%s (content fnv1a64 %016llx)", a->parallelism.deepspeed_file, (unsigned long long)a->parallelism.ds_hash);
    else snprintf(buf, n, "zero%d", a->parallelism.zero_stage);
}

// --device: cpu, cuda, cuda:N, guard or guard:lax (core/device.h); which backend runs is the command's to open (cli/device.c)
static int parse_device(void *obj, const char *v) {
    int index;
    if (os_device_parse(v, &index) < 0) return -1;
    ((os_sft_args *)obj)->device.device = v;
    return 0;
}

static void show_device(const void *obj, char *buf, size_t n) { snprintf(buf, n, "%s", ((const os_sft_args *)obj)->device.device); }

// --report_to: none, tensorboard or all (every sink omnishard has: TensorBoard); wandb named with its reason
static int parse_report_to(void *obj, const char *v) {
    os_sft_args *a = obj;
    if (!strcmp(v, "wandb"))
        return os_errf("--report_to wandb: Weights & Biases sends the metrics to its server over the network, which "
                       "omnishard does not do; use --report_to tensorboard (event files under --logging_dir) or read "
                       "OUTPUT_DIR/logging.jsonl");
    if (strcmp(v, "none") && strcmp(v, "tensorboard") && strcmp(v, "all"))
        return os_errf("--report_to: '%s' is not supported (supported: none, tensorboard or all)", v);
    a->logging.report_to = v;
    return 0;
}

static void show_report_to(const void *obj, char *buf, size_t n) { snprintf(buf, n, "%s", ((const os_sft_args *)obj)->logging.report_to); }

int os_sft_args_parse(os_sft_args *a, int argc, char **argv) {
    os_sft_args_defaults(a);
    int rc = os_opts_parse(command(a), argc, argv);
    if (rc != 0) return rc;
    if (a->data.data_seed < 0) a->data.data_seed = a->training.seed;
    if (os_sft_args_lora_check(a) < 0) return -1;
    if (!a->model.model || !a->data.dataset || !a->checkpoint.output_dir)
        return os_errf("--model, --dataset and --output_dir are required (omnishard sft --help)");
    if (!a->model.freeze_encoder)
        return os_errf("--freeze_encoder false: training the speech encoder is not supported (it is frozen, as in the "
                       "reference recipe)");
    if (!strcmp(a->model.attn_impl, "flash_attn") || !strcmp(a->model.attn_impl, "flash_attention_2"))
        return os_errf("--attn_impl %s: FlashAttention runs on CUDA GPUs only; omnishard has one exact "
                       "softmax attention on every device (on CUDA a fused kernel), what sdpa and eager compute: pass "
                       "--attn_impl sdpa or eager",
                       a->model.attn_impl);
    if (os_tf32_check(a->device.tf32, a->device.device, os_sft_args_bf16(&a->training)) < 0) return -1;
    if (a->model.trainable_embed_rows && strcmp(a->model.trainable_embed_rows, "all") && strcmp(a->model.trainable_embed_rows, "new") &&
        strcmp(a->model.trainable_embed_rows, "audio") && strcmp(a->model.trainable_embed_rows, "none"))
        return os_errf("--trainable_embed_rows: expected all, new, audio or none, got '%s'", a->model.trainable_embed_rows);
    return 0;
}

int os_sft_args_count(void) { return NOPTS; }

int os_sft_args_lora_check(const os_sft_args *a) {
    if (!strcmp(a->model.train_type, "lora")) return 0;
    static const char *const lora_only[] = {"lora_rank", "lora_alpha", "lora_dropout", "target_modules", "merge_lora"};
    char names[200];
    size_t k = 0;
    names[0] = 0;
    for (int i = 0; i < NOPTS; i++)
        for (size_t j = 0; j < sizeof lora_only / sizeof lora_only[0]; j++)
            if (a->given[i] && !strcmp(opts[i].name, lora_only[j]) && k < sizeof names)
                k += (size_t)snprintf(names + k, sizeof names - k, "%s--%s", k ? ", " : "", opts[i].name);
    if (!k) return 0;
    return os_errf("%s: LoRA option%s given without --train_type lora (omnishard's default is full training of every "
                   "weight; ms-swift's default is lora): add --train_type lora to train LoRA adapters, or drop %s to "
                   "train every weight", names, strchr(names, ',') ? "s" : "", strchr(names, ',') ? "them" : "it");
}

int os_sft_args_bf16(const os_sft_training_opts *t) {
    return t->torch_dtype && (!strcmp(t->torch_dtype, "bfloat16") || !strcmp(t->torch_dtype, "bf16"));
}

// --target_modules as the modules it selects: all-linear, or the list in the model's order without repeats
static void show_target_modules(const void *obj, char *buf, size_t n) {
    const char *s = ((const os_sft_args *)obj)->model.target_modules;
    unsigned t;
    snprintf(buf, n, "%s", s ? s : "(not given)");
    if (!s || os_lora_parse_targets(s, &t) < 0) return;   // (refused at parse time already)
    if (t == (1u << OS_LORA_N) - 1) {
        snprintf(buf, n, "all-linear");
        return;
    }
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < OS_LORA_N && k < n; i++)
        if (t >> i & 1) k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? "," : "", os_lora_module[i]);
}

static void show_param_loss(const void *obj, char *buf, size_t n) {
    const os_sft_args *a = obj;
    size_t k = 0;
    buf[0] = 0;
    for (int t = 0; t < a->training.nterms && k < n; t++) {
        const os_param_term *p = &a->training.terms[t];
        char c[32];
        if (p->kind == OS_TERM_L2)
            k += (size_t)snprintf(buf + k, n - k, "%sl2:%s:%s", t ? " " : "", os_float_str(p->coef, c, sizeof c), p->prefix);
        else k += (size_t)snprintf(buf + k, n - k, "%sdummy:%s", t ? " " : "", p->prefix);
    }
    if (!a->training.nterms) snprintf(buf, n, "(none)");
}

static void show_loss_weights(const void *obj, char *buf, size_t n) {
    const os_sft_args *a = obj;
    size_t k = 0;
    buf[0] = 0;
    for (int t = 0; t < a->model.n_loss_weights && k < n; t++) {
        char w[32];
        k += (size_t)snprintf(buf + k, n - k, "%s%s", t ? "," : "", os_float_str(a->model.loss_weights[t], w, sizeof w));
    }
    if (!a->model.n_loss_weights) snprintf(buf, n, "(default)");
}


int os_sft_args_value(const os_sft_args *a, int i, const char **name, char *buf, size_t n) {
    *name = opts[i].name;
    os_opts_value(&opts[i], a, buf, n);
    return !opts[i].per_rank;
}
