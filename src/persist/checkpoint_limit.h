// --save_total_limit N: after a checkpoint is complete, the complete checkpoints OUTPUT_DIR/checkpoint-STEP beyond the
// newest N are removed, except the best one: the lowest eval_loss that logging.jsonl records at a checkpoint's step
// (an evaluation at the same step as the save, as in Hugging Face's trainer). A checkpoint is first renamed to
// checkpoint-STEP.tmp, then removed, so an interrupted removal never leaves a checkpoint that looks complete.
#pragma once
#include <stddef.h>
#include <stdint.h>

// rank 0. Returns the number of checkpoints removed; one that cannot be removed is reported (warning) and kept.
int os_checkpoint_limit(const char *output_dir, int64_t limit);

// --resume_from_checkpoint as Hugging Face's trainer takes it: true (True, 1) means the latest complete checkpoint
// of output_dir; a directory without manifest.json (a run's output directory) its latest complete checkpoint;
// false (False, 0) no resume; anything else is used as given. Returns 1 with the checkpoint in out[n], 0 to use arg
// as given, 2 for no resume, -1 + message when a run directory holds no complete checkpoint.
int os_checkpoint_resolve(const char *arg, const char *output_dir, char *out, size_t n);
