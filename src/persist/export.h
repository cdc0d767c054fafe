// Writing a model directory that transformers loads unchanged:
//   config.json (the source config with the resized vocabulary, float32), model.safetensors (the LLM;
//   lm_head.weight omitted when tied), and for SLAM-Omni slam_omni.json + slam_omni.safetensors
//   (group_decode_adapter.*, encoder_projector.*), plus the source's tokenizer files.
// Collective: every rank calls it (stage 3 gathers bucket by bucket); rank 0 writes into OUT.tmp.<pid>, which is
// renamed to OUT at the end, so a failure never leaves a half-written directory. 0, or -1 on every rank.
#pragma once
#include "model/omni.h"
#include "zero/runtime.h"

// LoRA (docs/training.md "LoRA"): merge_lora 1 writes every targeted weight as W + (alpha/r) B A (the directory
// loads in transformers unchanged); 0 writes the base weights and OUT/lora_adapter/ (adapter_config.json +
// adapter_model.safetensors) for PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(OUT), OUT/lora_adapter).
int os_export(const os_model *m, zr_runtime *rt, const char *src_dir, const char *out_dir, int merge_lora);
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
