// sft options, named as ms-swift / Hugging Face TrainingArguments name them.
#pragma once
#include "train/step.h"
#include <stdint.h>
#include <stdio.h>

#define OS_MAX_TERMS 8
#define OS_DDP_TIMEOUT_DEFAULT 1800.0   // seconds, as torch.distributed and transformers' ddp_timeout

typedef struct {
    const char *model, *dataset, *output_dir, *resume_from_checkpoint, *model_type, *dump_grads, *dump_logits, *speech_encoder,
        *cache_speech_features, *new_rows_init;
    const char *lr_scheduler_type, *truncation_strategy, *val_dataset, *trainable_embed_rows;
    double num_train_epochs, learning_rate, weight_decay, max_grad_norm, warmup_ratio, adam_beta1, adam_beta2,
        adam_epsilon, split_dataset_ratio, ddp_timeout;
    int64_t max_steps, per_device_train_batch_size, gradient_accumulation_steps, warmup_steps, max_length,
        save_steps, logging_steps, eval_steps, seed;
    int zero_stage, gradient_checkpointing, code_layer, save_only_model;
    int freeze_llm, freeze_encoder, freeze_encoder_projector, freeze_group_decode_adapter;   // docs/training.md
    int num_latency_tokens, do_layershift;   // -1: slam_omni.json's (else 0, false)
    int mask_equal_length_audio;
    float loss_weights[OS_MAX_G + 1];
    int n_loss_weights;
    os_param_term terms[OS_MAX_TERMS];
    int nterms;
} os_sft_args;

// Parse argv (argv[0] is the command name). Returns 0, 1 when --help was printed, -1 + message on error.
int os_sft_args_parse(os_sft_args *a, int argc, char **argv);
void os_sft_args_usage(FILE *f);
// "name=value" lines of every option that must agree across ranks, for the start-up check
int os_sft_args_fingerprint(const os_sft_args *a, const char **fields, char (*values)[256], int max);
