// The micro-batch loader: one micro-batch at a time from a dataset, the same way for training and evaluation
// (docs/training.md, "Sample order and batches"). It owns the sample order (the epoch's permutation, or file
// order), this rank's slice of each step (os_data_micro, dataset/sampler.h), reading and collating the samples,
// the empty micro-batch past the end of the data (one pad-only sample without targets: every rank still runs a
// micro-step, so the collectives stay in lockstep), the check of the batch against the model, the speech inputs'
// preparation (os_speech_prepare), and the ranks' agreement that all of it worked.
#pragma once
#include "dataset/dataset.h"
#include "dataset/sampler.h"
#include "session/speech.h"

typedef struct {
    os_dataset *ds;
    const os_model *m;
    os_speech *speech;
    int32_t pad_id;
    int64_t batch, rank, ranks;
    int shuffle;             // 1: epoch e in the permutation of (seed, e); 0: file order
    uint64_t seed;
    int64_t *order;          // [ds->n] the sample order of order_epoch
    int64_t order_epoch;
    int64_t pos, g, step;    // the step's stream position, this rank's next global micro-batch, the step (messages)
    os_sample *smp;          // [batch] the samples of the current micro-batch
    os_sample empty;         // the sample of an empty micro-batch: R rows of two pad positions, labels -100
    int32_t empty_ids[2 * (OS_MAX_G + 1)], empty_lab[2 * (OS_MAX_G + 1)];
} os_loader;

typedef struct {
    os_batch b;              // the collated micro-batch (the empty sample when n = 0)
    int64_t n;               // samples (0: an empty micro-batch)
    int64_t g;               // its global index in the step: k * ranks + rank
} os_micro;

// batch: samples per micro-batch; shuffle 0: file order (evaluation). speech: the session's speech path (with
// speech->on 0 every speech input is an error). The loader keeps the pointers.
void os_loader_open(os_loader *l, os_dataset *ds, const os_model *m, os_speech *speech, int32_t pad_id,
                    int64_t batch, int shuffle, uint64_t seed);
void os_loader_close(os_loader *l);
// Begin a step (step >= 1) or an evaluation pass (step 0) at stream position `at`.
void os_loader_start(os_loader *l, os_data_pos at, int64_t step);
// The step's samples in stream order, from its start (dataset indices; os_data_take of them are the step's).
const int64_t *os_loader_stream(const os_loader *l);
// Of the next `per_rank` micro-batches of every rank, how many hold samples (the same on every rank).
int64_t os_loader_filled(const os_loader *l, int64_t per_rank);
// Rounds of one micro-batch per rank from the start until the epoch's end.
int64_t os_loader_rounds(const os_loader *l);
// Collective: this rank's next micro-batch of the step, collated, checked and with its speech inputs prepared.
// 0, or -1 on every rank when any rank failed (a sample that could not be read, ids outside the model, a speech
// input that does not fit): the failed rank's message is stored, the others store an echo (os_agree_ok).
int os_loader_next(os_loader *l, os_micro *mb);
void os_micro_free(os_micro *mb);
