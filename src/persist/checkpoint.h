// Sharded, resumable checkpoints: OUTPUT_DIR/checkpoint-STEP/
//   rank-NNNNN.safetensors  rank r's slice [r*S_b, min((r+1)*S_b, numel_b)) of every bucket b:
//                           "param/<bucket>", and unless save_only_model "exp_avg/<bucket>", "exp_avg_sq/<bucket>"
//   manifest.json           format, step, world size, stage, seed, per bucket (name, numel, slice), per rank file
//                           (bytes, FNV-1a 64 checksum), the parameter list (name, shape) of the model, "data"
//                           (the data position after the step) and "run" (settings a resume must share); its last
//                           member "manifest_fnv1a64" is the os_fnv1a of the file's bytes before the ',' ahead of it
//   config.json, slam_omni.json, tokenizer files   copied from the model directory (export needs nothing else);
//                           the manifest, written last, lists them too ("model_files": bytes, FNV-1a 64)
//   model.safetensors (or model-0000K-of-0000N.safetensors + model.safetensors.index.json), slam_omni.safetensors,
//   adapter_config.json, adapter_model.safetensors (LoRA, at the top as ms-swift's)
//                           with consolidated: the model as os_export writes it (persist/export.h; never merged),
//                           so transformers and PEFT load the checkpoint directory; config.json is then export's
//                           (the resized vocabulary, the saved dtype); listed in "model_files" too
// The directory is written as checkpoint-STEP.tmp and renamed when every rank's file and the manifest are on
// disk, so a crash never leaves a checkpoint that looks complete. The slice layout is the same for every stage,
// so a checkpoint resumes at any stage and (since ranges are re-cut on load) any number of ranks.
#pragma once
#include "dataset/sampler.h"
#include "model/omni.h"
#include "persist/export.h"
#include "zero/runtime.h"

#define OS_RUN_KEYS 12
// What a checkpoint records about its run besides tensors (docs/training.md, "Resume rules").
typedef struct {
    int64_t step;                 // (read) the checkpoint's step
    os_data_pos next;             // the data position after the checkpoint's step
    int64_t samples_seen;         // samples trained on so far (all epochs)
    int64_t global_batch;         // samples per step of the run that wrote it
    int64_t samples;              // training samples per epoch
    int optimizer_state;          // (read) the AdamW moments are in the checkpoint
    char dataset[4096];           // the dataset path (shown, not compared: key "--dataset" holds its digest)
    int n;                        // settings a resumed run must share: option name, value as text
    char key[OS_RUN_KEYS][32], val[OS_RUN_KEYS][256];
    // the run's lineage (manifest "run_id", "lineage"): this run's random id, and the runs it continues, oldest
    // first, as "ID@STEP" (run ID's checkpoints up to STEP are this run's past; "-": a checkpoint without an id)
    char run_id[24], lineage[1024];
} os_ckpt_run;

// Where and how a run saves (from its options): OUTPUT_DIR, the model directory whose config and tokenizer files
// travel with every checkpoint, the seed the manifest records, whether the AdamW moments are left out, and whether
// (and how: dtype, shard size) the consolidated model is written beside the rank files.
typedef struct {
    const char *output_dir, *model_dir;
    int64_t seed;
    int save_only_model, consolidated;
    os_export_opts exp;
} os_ckpt_dest;
// collective; 0 or -1 on every rank
int os_checkpoint_save(const os_model *m, zr_runtime *rt, const os_ckpt_dest *d, int64_t step, const os_ckpt_run *run);
// read DIR/manifest.json (checksum verified): the data position and settings; 0 or -1 + message
int os_checkpoint_read_run(const char *dir, os_ckpt_run *run);
// Every setting of `now` must equal the checkpoint's: else an error naming the option and both values, or with
// override a warning per difference (rank 0) and 0.
int os_checkpoint_check_run(const char *dir, const os_ckpt_run *saved, const os_ckpt_run *now, int override);
// DIR/manifest.json (checksum verified) and every file it lists besides the rank files (config.json, slam_omni.json,
// tokenizer files: "model_files") matches; 0 or -1 + message naming the file (os_checkpoint_load checks it too)
int os_checkpoint_verify_files(const char *dir);
// collective: load parameters (and moments unless the checkpoint has none) into rt; *step = the step it holds
int os_checkpoint_load(const os_model *m, zr_runtime *rt, const char *dir, int64_t *step);
// the same with the moments left as they are (zero in a new run: --resume_only_model)
int os_checkpoint_load_params(const os_model *m, zr_runtime *rt, const char *dir, int64_t *step);
// rank 0: remove OUTPUT_DIR/checkpoint-*.tmp (those the run manifest proves, io/runfiles.h; others are kept and named)
// and OUTPUT_DIR/final_model.tmp.PID of a process gone from this host, left by a crash or kill
void os_checkpoint_cleanup(const char *output_dir);
