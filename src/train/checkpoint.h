// Sharded, resumable checkpoints: OUTPUT_DIR/checkpoint-STEP/
//   rank-NNNNN.safetensors  rank r's slice [r*S_b, min((r+1)*S_b, numel_b)) of every bucket b:
//                           "param/<bucket>", and unless save_only_model "exp_avg/<bucket>", "exp_avg_sq/<bucket>"
//   manifest.json           format, step, world size, stage, seed, per bucket (name, numel, slice), per rank file
//                           (bytes, FNV-1a 64 checksum), the parameter list (name, shape) of the model
//   config.json, slam_omni.json, tokenizer files   copied from the model directory (export needs nothing else)
// The directory is written as checkpoint-STEP.tmp and renamed when every rank's file and the manifest are on
// disk, so a crash never leaves a checkpoint that looks complete. The slice layout is the same for every stage,
// so a checkpoint resumes at any stage and (since ranges are re-cut on load) any number of ranks.
#pragma once
#include "model/omni.h"
#include "train/args.h"
#include "zero/runtime.h"

// collective; 0 or -1 on every rank
int os_checkpoint_save(const os_model *m, zr_runtime *rt, const os_sft_args *a, int64_t step);
// collective: load parameters (and moments unless the checkpoint has none) into rt; *step = the step it holds
int os_checkpoint_load(const os_model *m, zr_runtime *rt, const char *dir, int64_t *step);
// remove OUTPUT_DIR/checkpoint-*.tmp left by a crash (rank 0)
void os_checkpoint_cleanup(const char *output_dir);
