// Writing a model directory that transformers loads unchanged:
//   config.json (the source config with the resized vocabulary and the dtype written), model.safetensors (the
//   LLM; lm_head.weight omitted when tied; above max_shard_bytes model-0000K-of-0000N.safetensors with
//   model.safetensors.index.json, as transformers' save_pretrained), and for SLAM-Omni slam_omni.json +
//   slam_omni.safetensors (group_decode_adapter.*, encoder_projector.*), plus the source's tokenizer files.
// Collective: every rank calls it (stage 3 gathers one bucket at a time: never the whole model on one rank); rank 0
// writes into OUT.tmp.<pid>, which is renamed to OUT at the end, so a failure never leaves a half-written
// directory (into: into OUT itself, a checkpoint's temporary directory). 0, or -1 on every rank.
#pragma once
#include "model/omni.h"
#include "zero/runtime.h"

#define OS_SHARD_DEFAULT ((int64_t)5000000000)   // transformers' save_pretrained max_shard_size "5GB"

typedef struct {
    // LoRA (docs/training.md "LoRA"): 1 writes every targeted weight as W + (alpha/r) B A (the directory loads in
    // transformers unchanged); 0 writes the base weights and OUT/lora_adapter/ (adapter_config.json +
    // adapter_model.safetensors) for PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(OUT),
    // OUT/lora_adapter); its base_model_name_or_path is OUT as an absolute path
    int merge_lora;
    int dtype;                 // OS_DT_F32, OS_DT_BF16 or OS_DT_F16: every tensor, rounded to nearest even
    int64_t max_shard_bytes;   // model.safetensors split above this many bytes; 0: OS_SHARD_DEFAULT
    int into;                  // write into out_dir (it exists), without slam_omni.json and the tokenizer files
    const char *final_dir;     // into: the directory out_dir becomes (the adapter's base); NULL: out_dir
    int adapter_at_top;        // 0: OUT/lora_adapter/; 1: adapter_config.json + adapter_model.safetensors in OUT itself,
                               // as ms-swift's checkpoint-N (transformers with PEFT then loads OUT as base + adapter)
} os_export_opts;
int os_export(const os_model *m, zr_runtime *rt, const char *src_dir, const char *out_dir, const os_export_opts *o);
// --save_dtype NAME (float32|fp32|bfloat16|bf16|float16|fp16, or NULL/"auto": model_dir/config.json's torch_dtype,
// float32 when it names none of these) as OS_DT_*; 0, or -1 + a message listing the supported names
int os_export_dtype(const char *name, const char *model_dir, int *dtype);
const char *os_export_dtype_name(int dtype);   // "float32", "bfloat16", "float16"
// --max_shard_size TEXT: bytes, or a number with KB, MB, GB (10^3 steps) or KiB, MiB, GiB (2^10 steps), as
// transformers' max_shard_size; 0, or -1 + message
int os_export_shard_size(const char *text, int64_t *bytes);
// Rank 0, before os_export (omnishard export --output_dir): OUT may be absent or an empty directory; a non-empty one
// only with overwrite (--overwrite_output_dir true), and never one that holds the checkpoint being read or any
// checkpoint (a manifest.json at any depth up to 8). 0, or -1 + a message naming OUT and why.
int os_export_check_dest(const char *checkpoint, const char *out, int overwrite);
// Remove OUT.tmp.PID directories beside OUT that a killed export left (any_pid 0: only those whose process is
// gone from this host; 1: all, for a run's final_model under its output directory's lock), each reported.
void os_export_cleanup(const char *out, int any_pid);
// 1 for a LoRA parameter (lora_A / lora_B)
int os_is_lora_param(const char *name);
// 1 if the parameter belongs in slam_omni.safetensors rather than model.safetensors
int os_is_slam_param(const char *name);
// Copy the tokenizer files (and with_configs: config.json, slam_omni.json) found in src_dir to dst_dir.
int os_copy_model_files(const char *src_dir, const char *dst_dir, int with_configs);
