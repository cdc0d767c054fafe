// Evaluation during sft: the held-out data (--val_dataset, or --split_dataset_ratio of the training data), its
// loss every --eval_steps optimizer steps (and after the last), logged as eval_* lines in logging.jsonl.
// The forward runs through os_train_micro in forward-only mode (os_trainer.forward_only): the losses without any
// backward, gradient scope or parameter term, so the gradient buffers are not touched. Every rank takes part in
// the same mode (the gathers of a forward; no rank opens a gradient scope, so the collective schedule agrees).
#pragma once
#include "dataset/dataset.h"
#include "train/args.h"
#include "train/loader.h"
#include "train/steplog.h"

// Collective: one pass over the loader's dataset in file order (os_loader_start at position 0, step 0): micro-batch
// j of the loader's batch goes to rank j % ranks; ranks without one run an empty micro-batch. 0, or -1 + message
// (on every rank) when a rank failed.
int os_evaluate(os_trainer *t, os_loader *l, os_eval_result *res);

// Open --dataset and --val_dataset (*eval NULL without one) as the model reads them (mo: --model,
// --mask_equal_length_audio; oc: the model's configuration, known before its weights load); T_s = positions of a
// spoken question (0: no speech encoder); batch: --per_device_train_batch_size, checked against what the format
// allows. Collective; 0 or -1 + message.
int os_sft_datasets(const os_sft_data_opts *d, const os_sft_model_opts *mo, int64_t batch, const os_omni_config *oc,
                    int64_t T_s, os_dataset **train, os_dataset **eval);
// With --split_dataset_ratio and no --val_dataset: replace *train by its training part, *eval = the held-out part
// (eval_steps: --eval_steps, for the note that there is nothing to evaluate).
int os_sft_split(const os_sft_data_opts *d, int64_t eval_steps, os_dataset **train, os_dataset **eval);
// Whether optimizer step `step` of `total` (epoch_end: the step ended an epoch) is followed by an evaluation
// (--eval_strategy: steps: every --eval_steps, default save_steps, --save_steps; epoch; no; and the last step unless no).
int os_sft_eval_due(const os_sft_training_opts *t, int64_t save_steps, int64_t step, int64_t total, int epoch_end);
// Evaluate and log to logging.jsonl and stderr (a non-finite loss as null); *loss = the weighted loss over all ranks.
// Collective; 0 or -1 + message. The caller stops the run on a non-finite *loss (src/train/sft.c).
int os_sft_eval(os_trainer *t, os_loader *l, os_steplog *log, int64_t step, double epoch, double *loss);
// The end-of-run note on skipped samples (collective).
void os_sft_report_skips(os_dataset *train, os_dataset *eval, const os_sft_data_opts *d);
