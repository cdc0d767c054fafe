// --save_total_limit N: after a checkpoint is complete, the complete checkpoints OUTPUT_DIR/checkpoint-STEP beyond the
// newest N are removed, except the best one: the lowest eval_loss that logging.jsonl records at a checkpoint's step
// (an evaluation at the same step as the save, as in Hugging Face's trainer). A checkpoint is first renamed to
// checkpoint-STEP.tmp, then removed, so an interrupted removal never leaves a checkpoint that looks complete.
#pragma once
#include <stdint.h>

// rank 0. Returns the number of checkpoints removed; one that cannot be removed is reported (warning) and kept.
int os_checkpoint_limit(const char *output_dir, int64_t limit);
