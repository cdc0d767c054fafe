// Opening an sft run, up to its first step: the start-up agreement on the model's config and the data files, the
// output directory's lock, the resume checks (docs/training.md, "Resume rules"), the session, the datasets and
// their micro-batch loaders, the data position and the step count, the resumed checkpoint's state and
// logging.jsonl. os_sft_state holds what the run opened; the options stay in their sections, which os_sft_open
// and the loop (train/sft.c) hand each stage.
#pragma once
#include "persist/checkpoint.h"
#include "persist/checkpoint_limit.h"
#include "train/args.h"
#include "train/loader.h"
#include "session/session.h"
#include "train/trainer.h"
#include "train/steplog.h"

typedef struct {
    int rank, N;
    os_session s;
    os_trainer trainer;           // the micro-step's view of the session (train/trainer.h)
    os_model *m;                  // &s.model
    os_dataset *ds, *ev;          // training and evaluation data (docs/dataset.md; ev NULL: no evaluation)
    os_loader train, eval;        // their micro-batches (eval: only with ev)
    char digest[128];             // of the whole --dataset file (a resumed run must read the same data)
    os_ckpt_run run, was;         // this run's settings and data position; the resumed checkpoint's
    os_ckpt_dest dest;
    os_ckpt_keeper keep;          // --save_total_limit over this run's lineage (rank 0)
    os_data_pos cur;              // where the sample stream continues (resumed: where the checkpoint's run stopped)
    int64_t nsamp, K, GB;         // training samples, accumulation steps, global batch (ranks * K * batch)
    int64_t done, start, total;   // steps done before this run (the resumed one's), the first and the last step
    int64_t warmup, seen, adam_base, saved;   // LR warm-up steps, samples trained on, AdamW's step offset, last save
    os_steplog log;
    double *bucket_norms;         // [buckets] each step's gradient norms
} os_sft_state;

// The options whose default comes from the model (--code_layer, --num_latency_tokens, --do_layershift,
// --loss_weights, --trainable_embed_rows) filled in as the run will resolve them, so that the ranks' start-up
// agreement compares what each rank will train with (a default equals the same value given). Reads the model's
// config files, no collective; a model that cannot be read leaves them as given.
void os_sft_resolve_model_defaults(os_sft_model_opts *mo);
// Collective; a failure ends every rank with its message (train/stop.h). a: the run's options, output_dir the run
// directory (os_sft_run's); they outlive r (the trainer points at their --param_loss terms).
void os_sft_open(os_sft_state *r, const os_sft_args *a);
void os_sft_close(os_sft_state *r);
