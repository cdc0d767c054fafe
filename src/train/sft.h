// The sft loop: epochs of optimizer steps, each of `accumulation` micro-batches per rank, AdamW with the LR
// schedule and global-norm clipping, logging.jsonl, checkpoints, and the final export to OUTPUT_DIR/final_model.
#pragma once
#include "train/args.h"
int os_sft_run(const os_sft_args *a);   // collective; returns the process exit code
