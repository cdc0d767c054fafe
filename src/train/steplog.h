// Per-step metrics: reduced over ranks every step (collective), written by rank 0 as one JSON object per logged
// step to OUTPUT_DIR/logging.jsonl, and shown as a progress line on stderr (rewritten in place on a terminal).
// Each line is formatted in memory and written with one checked write; a failed write (disk full) cuts the file
// back to its last complete line and is recorded with os_stop_write_failed (the run ends at the step boundary).
#pragma once
#include "io/tfevents.h"
#include "train/step.h"
#include <stdio.h>

// the phases of a step in seconds, logged as "time/<name>_s" (the mean over ranks; docs/training.md)
enum { OS_PH_DATA, OS_PH_COMPUTE, OS_PH_GATHER, OS_PH_REDUCE, OS_PH_OPTIM, OS_PH_CPU, OS_NPHASE };

// The values logged as the mean over the --logging_steps window (the steps since the last logged line, as
// transformers' Trainer logs its loss): loss, acc, and each term's loss and accuracy (slot 0 text, 1+i audio i)
enum { OS_WIN_LOSS, OS_WIN_ACC, OS_WIN_TERM, OS_WIN_TACC = OS_WIN_TERM + OS_MAX_G + 1, OS_WIN_N = OS_WIN_TACC + OS_MAX_G + 1 };
#define OS_GIB 1073741824.0   // memory(GiB): 2^30 bytes, as ms-swift

typedef struct {
    int fd, failed;
    char path[4200];
    char *line;        // the line being formatted (open_memstream)
    size_t line_len;
    int root, tty, resumed;
    int64_t bytes;     // what the log holds (rank 0) and its FNV-1a 64, kept as lines are written (the run's manifest)
    uint64_t sum;
    int64_t total, done;   // the last step; the steps done before this run (a resumed run's checkpoint step)
    double t_start, tokens_total;
    const int64_t *sample_ids;   // when set (OMNISHARD_LOG_SAMPLES=1): the step's samples, logged as "sample_ids"
    int64_t n_sample_ids;
    double targets_total;   // target tokens trained over all steps and ranks (0: every sample was skipped)
    double phase[OS_NPHASE];   // this rank's phase times of the step being logged (set by the caller)
    double win_sum[OS_WIN_N];  // the window's sums of the per-step values (rank 0), and how many steps had each
    int64_t win_n[OS_WIN_N];
    double run_loss;     // rank 0: the sum of this run's step losses (each the step's mean), over run_steps steps
    int64_t run_steps;
    os_tfevents tb;   // --report_to tensorboard: every line's numbers as scalars too (tb.f NULL: off)
} os_steplog;

// keep_through >= 0 (resume): keep the earlier run's lines up to that step and drop the later ones (rewritten
// atomically), so every step is logged once; -1: start a new log. 0, or -1 + message on rank 0 (not collective)
int os_steplog_open(os_steplog *l, const char *output_dir, int root, int64_t total_steps, int64_t keep_through);
// rank 0: also write every line's numbers to a new TensorBoard event file in tb_dir (train/tblog.h); 0 or -1 + message
int os_steplog_tensorboard(os_steplog *l, const char *tb_dir);
// loss_sum: sum of this rank's micro-batch losses; nonempty: global count of micro-batches with samples
void os_steplog_step(os_steplog *l, const os_model *m, int64_t step, double epoch, double loss_sum, int64_t nonempty,
                     double term_loss, const os_step_stats *acc, double lr, double grad_norm,
                     const double *bucket_norms, double seconds,
                     const zr_runtime *rt, int write);
// An evaluation's line {"step", "epoch", "eval_loss", "eval_text_loss", "eval_audio_loss_i", accuracies,
// "eval_samples", "eval_runtime_s"} (rank 0; the result is already reduced) and a line on stderr.
typedef struct os_eval_result {   // an evaluation's losses over all ranks (os_evaluate, train/evaluate.h)
    double sum[OS_MAX_G + 1];             // per loss term (0 text, 1+i audio layer i): summed CE
    int64_t count[OS_MAX_G + 1], correct[OS_MAX_G + 1];
    int64_t samples, tokens;
    double loss;                          // sum_k w_k * sum_k / count_k (token mean of each term, weighted)
    double seconds;
} os_eval_result;
void os_steplog_eval(os_steplog *l, const os_model *m, int64_t step, double epoch, const os_eval_result *r);
// rank 0: the log and the event file as they are now, in the run's manifest (io/runfiles.h; at every checkpoint)
int os_steplog_record(os_steplog *l);
// fsync and close (rank 0; the event file too), and record both in the run's manifest; 0, or -1 + message
int os_steplog_close(os_steplog *l);
