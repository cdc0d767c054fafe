#include "train/evaluate.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/timer.h"
#include "train/agree.h"
#include "zero/comm.h"
#include <string.h>

// the micro-batch's losses into res (its samples only: an empty micro-batch has no targets)
static void add_losses(os_eval_result *res, const os_step_stats *st, int64_t G, int64_t n) {
    for (int64_t q = 0; q <= G; q++) res->sum[q] += st->sum[q], res->count[q] += st->count[q], res->correct[q] += st->correct[q];
    res->samples += n, res->tokens += st->tokens;
}

// the sums over all ranks, and the weighted loss from them
static void reduce_losses(os_eval_result *res, const os_model *m) {
    int64_t G = m->oc.G;
    double v[2 + 3 * (OS_MAX_G + 1)];
    int nv = 2 + 3 * (int)(G + 1);
    v[0] = (double)res->samples, v[1] = (double)res->tokens;
    for (int64_t q = 0; q <= G; q++) v[2 + q] = res->sum[q], v[3 + G + q] = (double)res->count[q], v[4 + 2 * G + q] = (double)res->correct[q];
    comm_allreduce_sum_f64(v, nv);
    res->samples = (int64_t)v[0], res->tokens = (int64_t)v[1];
    for (int64_t q = 0; q <= G; q++) {
        res->sum[q] = v[2 + q], res->count[q] = (int64_t)v[3 + G + q], res->correct[q] = (int64_t)v[4 + 2 * G + q];
        if (res->count[q]) res->loss += m->oc.loss_w[q] * res->sum[q] / (double)res->count[q];
    }
}

int os_evaluate(os_trainer *t, os_loader *l, os_eval_result *res) {
    double t0 = os_now();
    memset(res, 0, sizeof *res);
    os_loader_start(l, (os_data_pos){0, 0}, 0);
    int64_t rounds = os_loader_rounds(l);
    t->forward_only = 1;   // losses only, on every rank alike (no gradient scope, no backward)
    int rc = 0;
    for (int64_t j = 0; j < rounds && rc == 0; j++) {
        os_micro mb;
        if ((rc = os_loader_next(l, &mb)) < 0) break;
        os_step_stats st;
        os_train_micro(t, &mb.b, 0.0f, &st);   // forward only: the gradient buffers are not touched
        os_micro_free(&mb);
        if (mb.n) add_losses(res, &st, t->m->oc.G, mb.n);
    }
    t->forward_only = 0;
    if (rc < 0) return -1;
    reduce_losses(res, t->m);
    res->seconds = os_now() - t0;
    return 0;
}

int os_sft_datasets(const os_sft_data_opts *d, const os_sft_model_opts *mo, int64_t batch, const os_omni_config *oc,
                    int64_t T_s, os_dataset **train, os_dataset **eval) {
    os_data_sizes z = {oc->G, oc->text_vocab, oc->audio_vocab, T_s, oc->latency, oc->layershift,
                       mo->mask_equal_length_audio, T_s < 1, d->system, 0, 0};
    uint64_t seed = (uint64_t)d->data_seed;
    *train = os_dataset_open_list(d->datasets, d->ndatasets, &z, mo->model, d->max_length, d->truncation_strategy,
                                  d->dataset_shuffle, seed, "train");
    *eval = d->val_dataset && *train ? os_dataset_open_list(d->val_datasets, d->nval_datasets, &z, mo->model, d->max_length,
                                                            d->truncation_strategy, d->dataset_shuffle, seed, "val")
                                     : NULL;
    int rc = *train && (*eval || !d->val_dataset) ? 0 : -1;
    int64_t Bm = batch, live = *train ? (*train)->live : 0;
    if (rc == 0 && live && Bm > live)
        rc = os_errf("--per_device_train_batch_size %lld: at most %lld with this dataset format", (long long)Bm, (long long)live);
    if (os_agree_ok(rc) == 0) return 0;
    if (*train) (*train)->free(*train);
    if (*eval) (*eval)->free(*eval);
    *train = *eval = NULL;
    return -1;
}

int os_sft_split(const os_sft_data_opts *d, int64_t eval_steps, os_dataset **train, os_dataset **eval) {
    if (*eval || d->split_dataset_ratio <= 0) {
        if (!*eval && eval_steps > 0)
            os_info("note: --eval_steps without --val_dataset or --split_dataset_ratio: no evaluation");
        return 0;
    }
    os_dataset *full = *train;
    if (os_dataset_split(full, d->split_dataset_ratio, (uint64_t)d->data_seed, train, eval) < 0) return -1;   // same on every rank
    os_info("evaluation: %lld of %lld samples held out (--split_dataset_ratio %g)", (long long)(*eval)->n,
            (long long)full->n, d->split_dataset_ratio);
    return 0;
}

int os_sft_eval_due(const os_sft_training_opts *t, int64_t save_steps, int64_t step, int64_t total, int epoch_end) {
    if (!strcmp(t->eval_strategy, "no")) return 0;
    if (!strcmp(t->eval_strategy, "epoch")) return step == total || epoch_end;
    int64_t every = t->eval_steps > 0 ? t->eval_steps : save_steps;
    return step == total || (every > 0 && step % every == 0);
}

int os_sft_eval(os_trainer *t, os_loader *l, os_steplog *log, int64_t step, double epoch, double *loss) {
    os_eval_result r;
    if (os_evaluate(t, l, &r) < 0) return -1;
    os_steplog_eval(log, t->m, step, epoch, &r);
    *loss = r.loss;
    return 0;
}

void os_sft_report_skips(os_dataset *train, os_dataset *eval, const os_sft_data_opts *d) {
    int64_t ntrain = os_dataset_skipped_total(train, comm_allreduce_max_i64);
    int64_t neval = eval && eval->path != train->path ? os_dataset_skipped_total(eval, comm_allreduce_max_i64) : 0;
    if (comm_rank() != 0 || ntrain + neval == 0) return;
    os_info("note: %lld sample(s) skipped (--max_length %lld, --truncation_strategy %s, or an empty answer; the first "
            "of each kind are named above, see docs/dataset.md)", (long long)(ntrain + neval), (long long)d->max_length,
            d->truncation_strategy);
}
