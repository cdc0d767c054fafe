// --save_total_limit N: after a checkpoint is complete, the complete checkpoints of this run's lineage beyond the
// newest N are removed, except the best one: the lowest eval_loss at a checkpoint's step (an evaluation at the same
// step as the save, as in Hugging Face's trainer). The lineage is this run's checkpoints and those of the runs it
// continues up to the step it resumed from (manifest "run_id", "lineage"); other checkpoints in OUTPUT_DIR (an
// abandoned branch: a run's checkpoints after the step another run resumed from) are reported at start-up and
// neither counted nor removed. A checkpoint is first renamed to checkpoint-STEP.tmp, then removed, so an
// interrupted removal never leaves a checkpoint that looks complete. Rank 0 only.
#pragma once
#include "persist/checkpoint.h"
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t limit;                  // 0: keep all
    const os_ckpt_run *run;         // this run's id and lineage
    int64_t *live;                  // steps of the lineage's complete checkpoints, ascending
    int nlive, cap;
    int64_t best_step, eval_step;   // the best checkpoint's step (-1: none); the last evaluation's step (-1: none)
    double best_loss, eval_loss;
} os_ckpt_keeper;

// this run's id (random) and lineage: resumed's lineage + "its id@its step" (resumed NULL: a new run)
void os_ckpt_new_run(os_ckpt_run *run, const os_ckpt_run *resumed);
// The checkpoints of output_dir sorted into the lineage and the rest (reported), and the best eval_loss among the
// lineage's from logging.jsonl (read once, line by line; call before the log is truncated for a resume).
void os_ckpt_keeper_init(os_ckpt_keeper *k, const char *output_dir, int64_t limit, const os_ckpt_run *run);
// an evaluation at step (its checkpoint may come before or after it)
void os_ckpt_keeper_eval(os_ckpt_keeper *k, int64_t step, double eval_loss);
// checkpoint-STEP is complete: the lineage's beyond the limit removed. Returns how many; one that cannot be
// removed is reported (warning) and kept.
int os_ckpt_keeper_saved(os_ckpt_keeper *k, const char *output_dir, int64_t step);
void os_ckpt_keeper_free(os_ckpt_keeper *k);

// --resume_from_checkpoint as Hugging Face's trainer takes it: true (True, 1) means the latest complete checkpoint
// of output_dir; a directory without manifest.json (a run's output directory) its latest complete checkpoint;
// false (False, 0) no resume; anything else is used as given. Returns 1 with the checkpoint in out[n], 0 to use arg
// as given, 2 for no resume, -1 + message when a run directory holds no complete checkpoint.
int os_checkpoint_resolve(const char *arg, const char *output_dir, char *out, size_t n);
