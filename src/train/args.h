// sft options, named as ms-swift / Hugging Face TrainingArguments name them.
#pragma once
#include "core/opts.h"
#include "dataset/mix.h"
#include "train/step.h"
#include "train/swift_options.h"
#include <stdint.h>
#include <stdio.h>

#define OS_MAX_TERMS 8
#define OS_DDP_TIMEOUT_DEFAULT 1800.0   // seconds, as torch.distributed and transformers' ddp_timeout
#define OS_SFT_MAX_OPTS 256   // room for the options table's flags of what was given

// The options in sections, as torchtitan's job config groups them; each part of the run takes its section.
typedef struct {   // the model and what is built into it (docs/training.md)
    const char *model, *model_type, *new_rows_init, *speech_encoder, *trainable_embed_rows;
    const char *train_type, *target_modules;   // LoRA: train_type lora, its targets (docs/training.md "LoRA")
    const char *attn_impl, *check_model;       // ms-swift flags accepted only with the values omnishard implements
    int code_layer, num_latency_tokens, do_layershift;   // -1: slam_omni.json's (else 3, 0, false)
    int mask_equal_length_audio;
    float loss_weights[OS_MAX_G + 1];
    int n_loss_weights;
    int freeze_llm, freeze_encoder, freeze_encoder_projector, freeze_group_decode_adapter;
    int lora_rank;
    double lora_alpha, lora_dropout;
} os_sft_model_opts;

typedef struct {   // the samples (docs/dataset.md)
    // --dataset / --val_dataset: each "PATH" or "PATH#N" (docs/dataset.md "Mixing datasets"); dataset and
    // val_dataset are the first of each (NULL: none given)
    const char *dataset, *val_dataset, *datasets[OS_MAX_SOURCES], *val_datasets[OS_MAX_SOURCES];
    int ndatasets, nval_datasets;
    int64_t max_length;
    int packing;   // --packing: training samples packed into rows of up to max_length (dataset/pack.h)
    const char *truncation_strategy;
    double split_dataset_ratio;
    int dataset_shuffle;   // the mixed samples in one seeded order (ms-swift's default true)
    int64_t data_seed;     // the data's seed: sampling, mixing, split and epoch order (-1 given: --seed's)
    const char *system;    // --system: the default system prompt of every task (a record's system_prompt wins)
    const char *cache_speech_features, *lazy_tokenize;
} os_sft_data_opts;

typedef struct {   // the optimisation: steps, batch, AdamW, schedule, precision, evaluation
    double num_train_epochs, learning_rate, weight_decay, max_grad_norm, warmup_ratio, adam_beta1, adam_beta2,
        adam_epsilon;
    int64_t max_steps, per_device_train_batch_size, gradient_accumulation_steps, warmup_steps, seed, eval_steps;
    const char *lr_scheduler_type, *torch_dtype, *eval_strategy;
    int gradient_checkpointing;
    os_param_term terms[OS_MAX_TERMS];   // --param_loss
    int nterms;
} os_sft_training_opts;

typedef struct {   // the output directory, checkpoints, resume, saved models (docs/operations.md)
    const char *output_dir, *resume_from_checkpoint, *save_strategy;
    int overwrite_output_dir, add_version;   // docs/operations.md, "Output directories"
    int64_t save_steps, save_total_limit;
    int save_only_model, resume_override_config, resume_only_model, merge_lora;
    const char *save_dtype;    // --save_dtype: auto (the model config's torch_dtype) or a dtype (persist/export.h)
    int64_t max_shard_size;    // --max_shard_size in bytes
    int save_consolidated;     // --save_consolidated: each checkpoint holds the model transformers loads
} os_sft_checkpoint_opts;

typedef struct {   // the ranks: ZeRO stage, collectives
    int zero_stage;
    // --deepspeed FILE.json (train/ds_config.h): the file, its notes, its FNV-1a 64, train_batch_size (0: auto)
    const char *deepspeed_file, *ds_notes;
    uint64_t ds_hash;
    int64_t ds_train_batch_size;
    const char *ddp_backend;
    double ddp_timeout;
    int head_balance;   // 1: the head's rows move between ranks, 0: stay, -1: not given (the backend decides)
} os_sft_parallelism_opts;

typedef struct {   // what is logged besides logging.jsonl
    int64_t logging_steps;
    const char *report_to, *logging_dir;
} os_sft_logging_opts;

typedef struct {   // the backend (core/device.h)
    const char *device;
    int tf32;   // --tf32: fp32 products in TF32 on --device cuda
} os_sft_device_opts;

typedef struct {   // test hooks and dumps
    const char *dump_grads, *dump_logits;
    int log_samples;   // not an option: the test hook OMNISHARD_LOG_SAMPLES=1 (cmd_sft sets it): each step's sample
                       // ids in logging.jsonl
} os_sft_debug_opts;

typedef struct {
    os_sft_model_opts model;
    os_sft_data_opts data;
    os_sft_training_opts training;
    os_sft_checkpoint_opts checkpoint;
    os_sft_parallelism_opts parallelism;
    os_sft_logging_opts logging;
    os_sft_device_opts device;
    os_sft_debug_opts debug;
    unsigned char given[OS_SFT_MAX_OPTS];   // given[i]: option i of the table was on the command line
    unsigned char known_given[OS_SFT_KNOWN_MAX];   // [i]: ms-swift's no-effect option i (train/swift_options.c) was given
} os_sft_args;

// Parse argv (argv[0] is the command name). Returns 0, 1 when --help or -h was given (nothing printed), -1 +
// message on error (unknown option, a value outside its range or its allowed values, a missing required option).
int os_sft_args_parse(os_sft_args *a, int argc, char **argv);
// -1 + message when a LoRA-only option (--lora_rank, --lora_alpha, --lora_dropout, --target_modules, --merge_lora)
// was given without --train_type lora, naming both fixes; 0 otherwise (sft and plan call it after parsing)
int os_sft_args_lora_check(const os_sft_args *a);
// 1 when --torch_dtype asks for bf16 mixed precision (bfloat16 or bf16)
int os_sft_args_bf16(const os_sft_training_opts *t);
// The option list with help, ranges and allowed values (omnishard sft --help).
void os_sft_args_usage(FILE *f);
// The defaults of every option (os_sft_args_parse starts from them); the table itself (omnishard plan parses the
// training options with it, into an os_sft_args)
void os_sft_args_defaults(os_sft_args *a);
const os_opt *os_sft_options(int *n);
// the sections of os_sft_args in their order, as --help lists them (each option's os_opt.section names one)
const os_opt_section *os_sft_sections(int *n);
// The options table has os_sft_args_count() entries. Entry i: *name (without "--") and its parsed value as
// canonical text in buf (the same value spelt differently gives the same text; every repeat of a repeatable
// option). Returns 1 when the ranks must agree on it, 0 for the few options that may differ per rank.
int os_sft_args_count(void);
int os_sft_args_value(const os_sft_args *a, int i, const char **name, char *buf, size_t n);
