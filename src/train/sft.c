#include "train/sft.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "core/timer.h"
#include "dataset/dataset.h"
#include "dataset/pretok.h"
#include "dataset/sampler.h"
#include "io/atomic.h"
#include "io/dirlock.h"
#include "optim/schedule.h"
#include "train/agree.h"
#include "persist/checkpoint.h"
#include "persist/checkpoint_limit.h"
#include "persist/dump.h"
#include "train/evaluate.h"
#include "persist/export.h"
#include "train/session.h"
#include "train/steplog.h"
#include "train/stop.h"
#include "zero/comm.h"
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

// checkpoint-STEP is complete: named by a stop from now on; --save_total_limit removes older ones (rank 0)
static void checkpoint_done(const os_sft_args *a, int64_t step) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/checkpoint-%lld", a->output_dir, (long long)step);
    os_stop_checkpoint(dir, step);
    if (comm_rank() == 0) os_checkpoint_limit(a->output_dir, a->save_total_limit);
}

// fault injection for tests: OMNISHARD_FAULT=RANK:STEP:KIND, KIND error (a user error), crash (SIGSEGV),
// exit (the process vanishes without a word)
static void maybe_fault(int rank, int64_t step) {
    const char *f = getenv("OMNISHARD_FAULT");
    int r;
    long long s;
    char kind[16] = "error";
    if (!f || sscanf(f, "%d:%lld:%15s", &r, &s, kind) < 2 || r != rank || s != step) return;
    if (!strcmp(kind, "crash")) raise(SIGSEGV);
    if (!strcmp(kind, "exit")) _exit(3);
    os_die("injected fault (OMNISHARD_FAULT=%s) at step %lld", f, s);
}

// the speech front end of an evaluation micro-batch, as in the training loop
static int eval_speech(void *sp, const os_batch *b, os_dataset *ds, const os_sample *smp, const int64_t *index, int64_t n) {
    return os_speech_prepare(sp, b, ds, smp, index, n);
}

// A non-finite loss, gradient norm or (before a save) parameter stops the run: every rank comes here with the
// same verdict (the loss flag and the norm are reduced values, the parameter is the first over all ranks).
// Rank 0 names the step, the first non-finite parameter and the last checkpoint written; nothing is saved.
static int stop_nonfinite(const os_model *m, zr_runtime *rt, const os_sft_args *a, int64_t step, const char *what,
                          int64_t saved, int64_t resumed_at) {
    int bad = zr_first_nonfinite(rt, 1), grads = bad >= 0;
    if (!grads) bad = zr_first_nonfinite(rt, 0);
    char last[4400];
    if (saved > resumed_at)
        snprintf(last, sizeof last, "the last checkpoint written is %s/checkpoint-%lld", a->output_dir, (long long)saved);
    else if (a->resume_from_checkpoint) snprintf(last, sizeof last, "no checkpoint written since %s", a->resume_from_checkpoint);
    else snprintf(last, sizeof last, "no checkpoint was written");
    if (comm_rank() == 0)
        os_info("omnishard: step %lld: %s; first parameter with a non-finite %s: %s%s%s; stopping without saving "
                "(%s; try a smaller --learning_rate or --max_grad_norm)",
                (long long)step, what, grads ? "gradient" : "value", bad >= 0 ? "'" : "",
                bad >= 0 ? m->reg.p[bad].name : "none (only the loss is)", bad >= 0 ? "'" : "", last);
    return 1;
}

// the parameters about to be saved are finite (collective); else the stop message and 1
static int weights_finite(const os_model *m, zr_runtime *rt, const os_sft_args *a, int64_t step, int64_t saved,
                          int64_t resumed_at) {
    if (zr_first_nonfinite(rt, 0) < 0) return 0;
    return stop_nonfinite(m, rt, a, step, "non-finite parameters after the optimizer step", saved, resumed_at);
}

// the start-up agreement on inputs (the options were agreed on in cmd_sft): the model's config.json here, the
// data files once read (os_dataset.digest, hashed while they were read)
static void agree_on_config(const os_sft_args *a) {
    char cfg[4200], v[128];
    snprintf(cfg, sizeof cfg, "%s/config.json", a->model);
    os_file_digest_text(cfg, v, sizeof v);
    const char *name = "the model's config.json", *val = v;
    if (os_agree_values(&name, &val, 1) < 0) os_die_err();
}

static void agree_on_data(const os_dataset *train, const os_dataset *eval) {
    char v[2][128];
    const char *names[2] = {"the --dataset file", "the --val_dataset file"}, *vals[2] = {v[0], v[1]};
    os_digest_text(train->bytes, train->digest, v[0], sizeof v[0]);
    if (eval) os_digest_text(eval->bytes, eval->digest, v[1], sizeof v[1]);
    if (os_agree_values(names, vals, eval ? 2 : 1) < 0) os_die_err();
}

// the settings a resumed run must share with the run that wrote the checkpoint (docs/training.md, "Resume rules")
static void run_set(os_ckpt_run *r, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void run_set(os_ckpt_run *r, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    snprintf(r->key[r->n], sizeof r->key[0], "%s", key);
    vsnprintf(r->val[r->n++], sizeof r->val[0], fmt, ap);
    va_end(ap);
}

// the settings as given
static void run_args(const os_sft_args *a, os_ckpt_run *r) {
    memset(r, 0, sizeof *r);
    snprintf(r->dataset, sizeof r->dataset, "%s", a->dataset);
    run_set(r, "--seed", "%lld", (long long)a->seed);
    run_set(r, "--max_length", "%lld", (long long)a->max_length);
    run_set(r, "--truncation_strategy", "%s", a->truncation_strategy);
    run_set(r, "--split_dataset_ratio", "%.17g", a->split_dataset_ratio);
    run_set(r, "--model_type", "%s", a->model_type);
}

// the settings as the model and the data resolved them (the --dataset file's digest; slam_omni.json, defaults)
static void run_model(const os_model *m, const char *digest, os_ckpt_run *r) {
    run_set(r, "--dataset", "%s", digest);
    run_set(r, "--code_layer", "%d", m->oc.G);
    char w[256];
    int k = 0;
    for (int t = 0; t <= m->oc.G && k < (int)sizeof w; t++) k += snprintf(w + k, sizeof w - (size_t)k, t ? ",%.9g" : "%.9g", m->oc.loss_w[t]);
    run_set(r, "--loss_weights", "%s", w);
}

int os_sft_run(const os_sft_args *a) {
    int rank = comm_rank(), N = comm_size();
    if (a->zero_stage == 0 && N > 1 && rank == 0)
        os_info("note: stage 0 replicates everything on each of the %d ranks (--deepspeed zero3 shards it)", N);
    agree_on_config(a);
    // one run per output directory: locked before anything in it is touched (docs/operations.md)
    int rc = rank == 0 ? os_dir_lock(a->output_dir) : 0;
    os_stop_if_failed(rc);
    os_stop_install();
    os_ckpt_run run, was;   // this run's settings and data position; the resumed checkpoint's
    if (a->resume_from_checkpoint) {   // settings that decide whether the model and data can be opened come first
        run_args(a, &run);
        if (a->code_layer >= 0) run_set(&run, "--code_layer", "%d", a->code_layer);
        rc = os_checkpoint_read_run(a->resume_from_checkpoint, &was);
        if (rc == 0) rc = os_checkpoint_check_run(a->resume_from_checkpoint, &was, &run, a->resume_override_config);
        os_stop_if_failed(rc);
    }
    os_session s;
    rc = os_session_open(&s, a, rank, N);
    os_stop_if_failed(rc);
    os_model *m = &s.model;
    int64_t R = m->oc.G > 0 ? m->oc.G + 1 : 1;
    os_dataset *ds = NULL, *ev = NULL;   // training and evaluation data (docs/dataset.md)
    os_stop_if_failed(os_sft_datasets(a, m, os_speech_positions(m), &ds, &ev));
    agree_on_data(ds, ev);
    char digest[128];   // of the whole --dataset file (a resumed run must read the same data)
    os_digest_text(ds->bytes, ds->digest, digest, sizeof digest);
    os_stop_if_failed(os_pretok_speech_len(ds, os_speech_positions(m)));
    if (ev) os_stop_if_failed(os_pretok_speech_len(ev, os_speech_positions(m)));
    os_stop_if_failed(os_sft_split(a, &ds, &ev));
    int64_t nsamp = ds->n, Bm = a->per_device_train_batch_size, K = a->gradient_accumulation_steps;
    int64_t GB = (int64_t)N * K * Bm, steps_per_epoch = (nsamp + GB - 1) / GB;
    // the data position: where the sample stream continues (a resumed run: where the checkpoint's run stopped)
    os_data_pos cur = {0, 0};
    int64_t done = 0, seen = 0, adam_base = 0;
    if (a->resume_from_checkpoint) {   // the model's code layers and loss weights (the rest was checked above)
        os_ckpt_run late = {.n = 0};
        snprintf(late.dataset, sizeof late.dataset, "%s", a->dataset);
        run_model(m, digest, &late);
        os_stop_if_failed(os_checkpoint_check_run(a->resume_from_checkpoint, &was, &late, a->resume_override_config));
        done = was.step, cur = was.next, seen = was.samples_seen;
        if (cur.pos >= nsamp) cur.epoch++, cur.pos = 0;   // (a smaller dataset under --resume_override_config)
    }
    run_args(a, &run);
    run_model(m, digest, &run);
    run.samples = nsamp, run.global_batch = GB;
    const os_ckpt_dest dest = {a->output_dir, a->model, a->seed, a->save_only_model};
    int64_t total = a->max_steps > 0 ? a->max_steps
                                     : done + os_data_steps(cur, os_data_end(a->num_train_epochs, nsamp), nsamp, GB);
    if (total < 1 && !a->resume_from_checkpoint) total = 1;
    int64_t warmup = a->warmup_steps > 0 ? a->warmup_steps : (int64_t)ceil(a->warmup_ratio * (double)total);
    if (rank == 0)
        os_info("omnishard sft: %lld samples, %d rank(s), ZeRO stage %d, %lld steps (%lld per epoch), global batch %lld, "
                "%lld parameters (%lld trained)",
                (long long)nsamp, N, a->zero_stage, (long long)total, (long long)steps_per_epoch, (long long)GB,
                (long long)os_reg_numel(&m->reg, 0), (long long)os_reg_numel(&m->reg, 1));
    if (rank == 0) os_checkpoint_cleanup(a->output_dir);
    int64_t start = 1;
    if (a->resume_from_checkpoint) {
        int64_t loaded = 0;
        os_stop_if_failed(os_checkpoint_load(m, &s.rt, a->resume_from_checkpoint, &loaded));
        start = done + 1;
        if (rank == 0) os_info("resumed from %s at step %lld: epoch %lld, sample position %lld of %lld (%lld samples "
                               "trained on; global batch %lld, was %lld)", a->resume_from_checkpoint, (long long)done,
                               (long long)cur.epoch, (long long)cur.pos, (long long)nsamp, (long long)seen, (long long)GB,
                               (long long)was.global_batch);
        if (!was.optimizer_state) {
            adam_base = done;   // zero moments: the bias correction restarts with them
            if (rank == 0)
                os_info("omnishard: WARNING: %s was saved with --save_only_model: it holds no optimizer state, so the "
                        "AdamW moments START FROM ZERO (bias correction restarts at 1); this is not the same run as an "
                        "uninterrupted one", a->resume_from_checkpoint);
        }
        os_stop_checkpoint(a->resume_from_checkpoint, done);
    }
    os_steplog log;
    os_stop_if_failed(os_steplog_open(&log, a->output_dir, rank == 0, total, a->resume_from_checkpoint ? done : -1));
    int log_samples = getenv("OMNISHARD_LOG_SAMPLES") && !strcmp(getenv("OMNISHARD_LOG_SAMPLES"), "1");

    int64_t *perm = os_alloc(sizeof(int64_t) * (size_t)nsamp, "sample order");
    int64_t perm_epoch = -1;
    os_sample *smp = os_alloc(sizeof(os_sample) * (size_t)Bm, "micro-batch samples");
    os_sample empty = {.R = R, .L = 2, .lead = 0, .wav_index = -1};
    int32_t empty_ids[2 * OS_MAX_G + 2], empty_lab[2 * OS_MAX_G + 2];
    for (int i = 0; i < 2 * OS_MAX_G + 2; i++) empty_ids[i] = s.pad_id, empty_lab[i] = -100;
    empty.ids = empty_ids, empty.labels = empty_lab;

    int64_t saved = start - 1;
    int exit_code = 0;
    double *bucket_norms = os_alloc(sizeof(double) * (size_t)m->reg.nb, "bucket grad norms");
    for (int64_t step = start; step <= total; step++) {
        os_stop_boundary(step - 1);   // a signal or a failed write on any rank ends every rank here (collective)
        os_stop_step(step, total);
        double t0 = os_now();
        comm_set_step(step);
        maybe_fault(rank, step);
        int64_t gstep = step - 1, base = cur.pos;
        if (cur.epoch != perm_epoch) os_epoch_perm(perm, nsamp, (uint64_t)a->seed, cur.epoch), perm_epoch = cur.epoch;
        // micro-batches with at least one sample, over all ranks: the data gradient is their mean
        int64_t nonempty = 0;
        for (int64_t j = 0; j < N * K; j++) nonempty += base + j * Bm < nsamp;
        s.trainer.term_scale = 1.0f / (float)(N * K);
        os_step_stats acc;
        memset(&acc, 0, sizeof acc);
        double loss_sum = 0.0, term_loss = 0.0, t_data = 0.0, t_micro = 0.0;
        s.rt.times = (zr_times){0};
        for (int64_t k = 0; k < K; k++) {
            double td = os_now();
            int64_t first = base + (k * N + rank) * Bm, n = 0;
            for (int64_t i = 0; i < Bm && first + i < nsamp; i++, n++)
                if (ds->get(ds, perm[first + i], &smp[i]) < 0) rc = -1;
            os_stop_if_failed(rc);
            os_batch b;
            if (n) os_collate(&b, smp, n, s.pad_id);
            else os_collate(&b, &empty, 1, s.pad_id);   // nothing left for this micro-batch: run with no targets
            if (os_batch_check(m, &b) < 0) rc = os_err_ctx("%s (step %lld)", a->dataset, (long long)step);
            else if (os_speech_prepare(&s.speech, &b, ds, smp, n ? perm + first : NULL, n) < 0) rc = -1;   // WAV -> log-mel
            os_stop_if_failed(rc);
            double tm = os_now();
            t_data += tm - td;
            os_step_stats st;
            s.trainer.lora_key = os_lora_dropout_key((uint64_t)a->seed, step, k * N + rank);
            int dump = a->dump_logits && step == 1 && k == 0 && rank == 0;   // a per-rank option: no collective here
            if (dump) s.trainer.dump_logits = os_alloc(sizeof(float) * (size_t)(b.B * b.L * m->V), "logits dump");
            os_train_micro(&s.trainer, &b, n ? 1.0f / (float)nonempty : 0.0f, &st);
            t_micro += os_now() - tm;
            if (dump) {   // a failed write ends every rank at the step boundary
                if (os_dump_logits(a->dump_logits, s.trainer.dump_logits, b.B * b.L, m->V) < 0) os_stop_write_failed();
                os_free(s.trainer.dump_logits);
                s.trainer.dump_logits = NULL;
            }
            os_batch_free(&b);
            if (n) loss_sum += st.loss;
            term_loss = st.term_loss;
            for (int t = 0; t <= m->oc.G; t++)
                acc.sum[t] += st.sum[t], acc.count[t] += st.count[t], acc.correct[t] += st.correct[t];
            acc.tokens += n ? st.tokens : 0;
        }
        zr_times in_micro = s.rt.times;   // the collectives inside the micro-batches are not compute
        zr_reduce_grads(&s.rt);
        if (a->dump_grads && step == 1) os_stop_if_failed(os_dump_grads(m, &s.rt, a->dump_grads));
        double gnorm = zr_grad_norm(&s.rt, bucket_norms);
        if (comm_any_failed(!isfinite(loss_sum) || !isfinite(term_loss)) || !isfinite(gnorm)) {
            char what[128];
            snprintf(what, sizeof what, "non-finite %s (grad_norm %g)", isfinite(gnorm) ? "loss" : "gradient norm", gnorm);
            exit_code = stop_nonfinite(m, &s.rt, a, step, what, saved, start - 1);
            break;
        }
        float clip = 1.0f;
        if (a->max_grad_norm > 0) {
            double c = a->max_grad_norm / (gnorm + 1e-6);
            if (c < 1.0) clip = (float)c;
        }
        double lr = os_lr_at(a->lr_scheduler_type, a->learning_rate, gstep, warmup, total);
        zr_adamw_step(&s.rt, (float)lr, (float)a->adam_beta1, (float)a->adam_beta2, (float)a->adam_epsilon,
                      (float)a->weight_decay, clip, step - adam_base);
        int64_t took = os_data_take(&cur, nsamp, GB);
        if (log_samples) log.sample_ids = perm + base, log.n_sample_ids = took;
        seen += took;
        os_data_advance(&cur, nsamp, GB);
        run.next = cur, run.samples_seen = seen;
        double epoch_done = (double)cur.epoch + (double)cur.pos / (double)nsamp;   // epochs completed after this step
        log.phase[OS_PH_DATA] = t_data, log.phase[OS_PH_COMPUTE] = t_micro - in_micro.gather - in_micro.reduce;
        log.phase[OS_PH_GATHER] = s.rt.times.gather, log.phase[OS_PH_REDUCE] = s.rt.times.reduce;
        log.phase[OS_PH_OPTIM] = s.rt.times.optim;
        os_steplog_step(&log, m, step, epoch_done,
                        loss_sum, nonempty, term_loss, &acc, lr, gnorm, bucket_norms, os_now() - t0, &s.rt,
                        a->logging_steps > 0 && (step % a->logging_steps == 0 || step == total));
        if (ev && os_sft_eval_due(a, step, total))
            os_stop_if_failed(os_sft_eval(&s.trainer, ev, a, s.pad_id, eval_speech, &s.speech, &log, step, epoch_done));
        if (a->save_steps > 0 && step % a->save_steps == 0) {
            if ((exit_code = weights_finite(m, &s.rt, a, step, saved, start - 1))) break;
            os_stop_if_failed(os_checkpoint_save(m, &s.rt, &dest, step, &run));
            checkpoint_done(a, step);
            saved = step;
        }
    }
    if (!exit_code) os_stop_boundary(total);
    if (!exit_code && start <= total && log.targets_total == 0)   // the same value on every rank (reduced each step)
        os_die("no step had a target token: every sample was skipped or has no trained position (%lld skipped; "
               "--max_length %lld, --truncation_strategy %s; docs/dataset.md); no model written", (long long)os_dataset_skipped_total(ds, comm_allreduce_max_i64),
               (long long)a->max_length, a->truncation_strategy);
    if (!exit_code && saved < total) exit_code = weights_finite(m, &s.rt, a, total, saved, start - 1);
    char out[4200];
    snprintf(out, sizeof out, "%s/final_model", a->output_dir);
    if (!exit_code) {
        if (saved < total) {
            os_stop_if_failed(os_checkpoint_save(m, &s.rt, &dest, total, &run));
            checkpoint_done(a, total);
        }
        os_stop_if_failed(os_export(m, &s.rt, a->model, out, a->merge_lora));
    }
    os_stop_if_failed(os_steplog_close(&log));   // the log's last lines are on disk
    if (!exit_code) {
        if (rank == 0) os_info("omnishard sft: done; model written to %s", out);
        os_sft_report_skips(ds, ev, a);
    }
    os_free(perm), os_free(smp), os_free(bucket_norms);
    ds->free(ds);
    if (ev) ev->free(ev);
    os_session_close(&s);
    return exit_code;
}
