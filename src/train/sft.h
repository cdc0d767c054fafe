// The sft loop: epochs of optimizer steps, each of `accumulation` micro-batches per rank, AdamW with the LR
// schedule and global-norm clipping, logging.jsonl, checkpoints, and the final export to OUTPUT_DIR/final_model.
#pragma once
#include "train/args.h"
// What rank 0 does once the run has trained and saved (the charts of images/, drawn by cli/): run_dir is the directory
// the run wrote (--output_dir, or its vN-* folder with --add_version), log_fd its logging.jsonl open for reading
// (read it with pread, or a dup of it from offset 0; the log is not opened again). 0, or -1 + message.
typedef int (*os_sft_after_fn)(const char *run_dir, int log_fd);
// collective; returns the process exit code (1 on rank 0 when after fails)
int os_sft_run(const os_sft_args *a, os_sft_after_fn after);
