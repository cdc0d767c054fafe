#include "train/evaluate.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/timer.h"
#include "zero/comm.h"
#include <string.h>

// every rank learns whether any failed; the ranks that did not fail get a message too
static int agree(int rc) {
    int failed = comm_any_failed(rc < 0);
    if (failed && rc == 0) os_err_echo("stopping: %d other rank(s) reported an error", failed);
    return failed ? -1 : 0;
}

int os_evaluate(os_trainer *t, os_dataset *ev, int64_t batch, int32_t pad_id, os_micro_hook hook, void *hook_ctx,
                os_eval_result *res) {
    const os_model *m = t->m;
    int rank = comm_rank(), N = comm_size();
    int64_t G = m->oc.G, R = G > 0 ? G + 1 : 1, n = ev->n, rounds = (n + N * batch - 1) / (N * batch);
    double t0 = os_now();
    memset(res, 0, sizeof *res);
    os_sample *smp = os_alloc(sizeof(os_sample) * (size_t)batch, "eval samples");
    int64_t *index = os_alloc(sizeof(int64_t) * (size_t)batch, "eval indices");
    int32_t eids[2 * (OS_MAX_G + 1)], elab[2 * (OS_MAX_G + 1)];
    for (int i = 0; i < 2 * (OS_MAX_G + 1); i++) eids[i] = pad_id, elab[i] = -100;
    os_sample empty = {.R = R, .L = 2, .ids = eids, .labels = elab, .wav_index = -1};
    t->forward_only = 1;   // losses only, on every rank alike (no gradient scope, no backward)
    int rc = 0;
    for (int64_t j = 0; j < rounds && rc == 0; j++) {
        int64_t first = (j * N + rank) * batch, k = 0;
        for (; k < batch && first + k < n && rc == 0; k++) {
            index[k] = first + k;
            rc = ev->get(ev, first + k, &smp[k]);
        }
        if ((rc = agree(rc)) < 0) break;
        os_batch b;
        if (k) os_collate(&b, smp, k, pad_id);
        else os_collate(&b, &empty, 1, pad_id);
        if (os_batch_check(m, &b) < 0) rc = os_err_ctx("%s (evaluation)", ev->path);
        if (rc == 0 && hook) rc = hook(hook_ctx, &b, ev, smp, index, k);
        if ((rc = agree(rc)) < 0) {
            os_batch_free(&b);
            break;
        }
        os_step_stats st;
        os_train_micro(t, &b, 0.0f, &st);   // forward only: the gradient buffers are not touched
        os_batch_free(&b);
        if (!k) continue;
        for (int64_t q = 0; q <= G; q++) res->sum[q] += st.sum[q], res->count[q] += st.count[q], res->correct[q] += st.correct[q];
        res->samples += k, res->tokens += st.tokens;
    }
    t->forward_only = 0;
    os_free(smp), os_free(index);
    if (rc < 0) return -1;
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
    res->seconds = os_now() - t0;
    return 0;
}

int os_sft_datasets(const os_sft_args *a, const os_model *m, int64_t T_s, os_dataset **train, os_dataset **eval) {
    os_data_sizes z = {m->oc.G, m->oc.text_vocab, m->oc.audio_vocab, T_s, m->oc.latency, m->oc.layershift, a->mask_equal_length_audio};
    *train = os_dataset_open(a->dataset, &z, a->model, a->max_length, a->truncation_strategy);
    *eval = a->val_dataset && *train ? os_dataset_open(a->val_dataset, &z, a->model, a->max_length, a->truncation_strategy) : NULL;
    int rc = *train && (*eval || !a->val_dataset) ? 0 : -1;
    int64_t Bm = a->per_device_train_batch_size, live = *train ? (*train)->live : 0;
    if (rc == 0 && live && Bm > live)
        rc = os_errf("--per_device_train_batch_size %lld: at most %lld with this dataset format", (long long)Bm, (long long)live);
    if (agree(rc) == 0) return 0;
    if (*train) (*train)->free(*train);
    if (*eval) (*eval)->free(*eval);
    *train = *eval = NULL;
    return -1;
}

int os_sft_split(const os_sft_args *a, os_dataset **train, os_dataset **eval) {
    if (*eval || a->split_dataset_ratio <= 0) {
        if (!*eval && a->eval_steps > 0)
            os_info("note: --eval_steps without --val_dataset or --split_dataset_ratio: no evaluation");
        return 0;
    }
    os_dataset *full = *train;
    if (os_dataset_split(full, a->split_dataset_ratio, (uint64_t)a->seed, train, eval) < 0) return -1;   // same on every rank
    os_info("evaluation: %lld of %lld samples held out (--split_dataset_ratio %g)", (long long)(*eval)->n,
            (long long)full->n, a->split_dataset_ratio);
    return 0;
}

int os_sft_eval_due(const os_sft_args *a, int64_t step, int64_t total) {
    int64_t every = a->eval_steps > 0 ? a->eval_steps : a->save_steps;
    return step == total || (every > 0 && step % every == 0);
}

int os_sft_eval(os_trainer *t, os_dataset *ev, const os_sft_args *a, int32_t pad_id, os_micro_hook hook, void *hook_ctx,
                os_steplog *log, int64_t step, double epoch) {
    os_eval_result r;
    if (os_evaluate(t, ev, a->per_device_train_batch_size, pad_id, hook, hook_ctx, &r) < 0) return -1;
    os_steplog_eval(log, t->m, step, epoch, &r);
    return 0;
}

void os_sft_report_skips(os_dataset *train, os_dataset *eval, const os_sft_args *a) {
    int64_t ntrain = os_dataset_skipped_total(train, comm_allreduce_max_i64);
    int64_t neval = eval && eval->path != train->path ? os_dataset_skipped_total(eval, comm_allreduce_max_i64) : 0;
    if (comm_rank() != 0 || ntrain + neval == 0) return;
    os_info("note: %lld sample(s) skipped (--max_length %lld, --truncation_strategy %s, or an empty answer; the first "
            "of each kind are named above, see docs/dataset.md)", (long long)(ntrain + neval), (long long)a->max_length,
            a->truncation_strategy);
}
