#include "train/sft.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/knobs.h"
#include "core/timer.h"
#include "lr/schedule.h"
#include "persist/checkpoint_limit.h"
#include "persist/dump.h"
#include "persist/export.h"
#include "train/args_json.h"
#include "train/evaluate.h"
#include "train/rundir.h"
#include "train/sft_open.h"
#include "train/stop.h"
#include "zero/comm.h"
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#define TRAIN_HINT "try a smaller --learning_rate or --max_grad_norm"

// A non-finite loss, gradient norm, evaluation loss or (before a save) parameter stops the run: every rank comes here with the
// same verdict (the loss flag and the norm are reduced values, the parameter is the first over all ranks).
// Rank 0 names the step, the first non-finite parameter and the last checkpoint written; nothing is saved.
static int stop_nonfinite(os_sft_state *r, const os_sft_checkpoint_opts *ck, int64_t step, const char *what,
                          const char *hint) {
    int bad = zr_first_nonfinite(&r->s.rt, 1), grads = bad >= 0;
    if (!grads) bad = zr_first_nonfinite(&r->s.rt, 0);
    char last[4400];
    if (r->saved > r->start - 1)
        snprintf(last, sizeof last, "the last checkpoint written is %s/checkpoint-%lld", ck->output_dir, (long long)r->saved);
    else if (ck->resume_from_checkpoint) snprintf(last, sizeof last, "no checkpoint written since %s", ck->resume_from_checkpoint);
    else snprintf(last, sizeof last, "no checkpoint was written");
    if (r->rank == 0)
        os_info("omnishard: step %lld: %s; first parameter with a non-finite %s: %s%s%s; stopping without saving "
                "(%s; %s)",
                (long long)step, what, grads ? "gradient" : "value", bad >= 0 ? "'" : "",
                bad >= 0 ? r->m->reg.p[bad].name : "none (only the loss is)", bad >= 0 ? "'" : "", last, hint);
    return 1;
}

// Save checkpoint-STEP when the parameters are finite (collective; else the stop message and 1). Once complete, a
// stop names it, and --save_total_limit removes older ones (rank 0).
static int save(os_sft_state *r, const os_sft_checkpoint_opts *ck, int64_t step) {
    if (zr_first_nonfinite(&r->s.rt, 0) >= 0)
        return stop_nonfinite(r, ck, step, "non-finite parameters after the optimizer step", TRAIN_HINT);
    os_stop_if_failed(os_checkpoint_save(r->m, &r->s.rt, &r->dest, step, &r->run));
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/checkpoint-%lld", ck->output_dir, (long long)step);
    os_stop_checkpoint(dir, step);
    if (r->rank == 0) os_ckpt_keeper_saved(&r->keep, ck->output_dir, step);
    if (os_steplog_record(&r->log) < 0) os_stop_write_failed();   // the log so far, in the run's manifest
    r->saved = step;
    return 0;
}

// --save_strategy: steps (every --save_steps), epoch (where an epoch ends) or no; the last step saves unless no
static int save_due(const os_sft_checkpoint_opts *ck, int64_t step, int epoch_end) {
    if (!strcmp(ck->save_strategy, "epoch")) return epoch_end;
    return !strcmp(ck->save_strategy, "steps") && ck->save_steps > 0 && step % ck->save_steps == 0;
}

// what a step's micro-batches report: their data losses, parameter terms, per-term sums and times
typedef struct {
    double loss_sum, term_loss;
    int64_t nonempty;   // micro-batches with at least one sample, over all ranks
    os_step_stats acc;
    double t_data, t_micro;   // seconds in the loader (reading, collating, WAV -> log-mel) and in the micro-steps
    zr_times in_micro;        // the runtime's collective waits inside the micro-steps (not compute)
} micro_report;

// One micro-step: forward + backward, the data gradient scaled by 1 / (non-empty micro-batches of the step), LoRA's
// dropout stream from --seed; returns its seconds. --dump_logits writes rank 0's first logits (a per-rank option: no
// collective; a failed write ends every rank at the step boundary).
static double micro_step(os_sft_state *r, const os_sft_training_opts *tr, const os_sft_debug_opts *dbg, int64_t step,
                         const os_micro *mb, float dscale, os_step_stats *st) {
    os_trainer *t = &r->trainer;
    t->lora_key = os_lora_dropout_key((uint64_t)tr->seed, step, mb->g);
    int dump = dbg->dump_logits && step == 1 && mb->g == 0;
    if (dump) t->dump_logits = os_alloc(sizeof(float) * (size_t)(mb->b.B * mb->b.L * r->m->V), "logits dump");
    double t0 = os_now();
    os_train_micro(t, &mb->b, dscale, st);
    double took = os_now() - t0;
    if (!dump) return took;
    if (os_dump_logits(dbg->dump_logits, t->dump_logits, mb->b.B * mb->b.L, r->m->V) < 0) os_stop_write_failed();
    os_free(t->dump_logits);
    t->dump_logits = NULL;
    return took;
}

// this rank's K micro-batches of the step; the data gradient is the mean over the step's non-empty ones
static void micro_batches(os_sft_state *r, const os_sft_training_opts *tr, const os_sft_debug_opts *dbg, int64_t step,
                          micro_report *sl) {
    memset(sl, 0, sizeof *sl);
    os_loader_start(&r->train, r->cur, step);
    sl->nonempty = os_loader_filled(&r->train, r->K);
    r->trainer.term_scale = 1.0f / (float)(r->N * r->K);
    r->s.rt.times = (zr_times){0};
    r->s.rt.gather_bytes = 0;
    for (int64_t k = 0; k < r->K; k++) {
        os_micro mb;
        double t0 = os_now();
        if (os_loader_next(&r->train, &mb) < 0) os_stop_if_failed(-1);
        sl->t_data += os_now() - t0;
        os_step_stats st;
        sl->t_micro += micro_step(r, tr, dbg, step, &mb, mb.n ? 1.0f / (float)sl->nonempty : 0.0f, &st);
        os_micro_free(&mb);
        if (mb.n) sl->loss_sum += st.loss, sl->acc.tokens += st.tokens;
        sl->acc.head_moved += st.head_moved;
        sl->term_loss = st.term_loss;
        for (int t = 0; t <= r->m->oc.G; t++)
            sl->acc.sum[t] += st.sum[t], sl->acc.count[t] += st.count[t], sl->acc.correct[t] += st.correct[t];
    }
    sl->in_micro = r->s.rt.times;
}

// where the step's time went (logging.jsonl's time/*_s; docs/training.md)
static void phase_times(os_sft_state *r, const micro_report *sl, double cpu0) {
    double *ph = r->log.phase;
    ph[OS_PH_DATA] = sl->t_data, ph[OS_PH_COMPUTE] = sl->t_micro - sl->in_micro.gather - sl->in_micro.reduce;
    ph[OS_PH_GATHER] = r->s.rt.times.gather, ph[OS_PH_REDUCE] = r->s.rt.times.reduce;
    ph[OS_PH_OPTIM] = r->s.rt.times.optim, ph[OS_PH_CPU] = os_cpu_now() - cpu0;
}

// a NaN/Inf loss on any rank or a non-finite gradient norm: the stop message and 1
static int check_finite(os_sft_state *r, const os_sft_checkpoint_opts *ck, int64_t step, const micro_report *sl,
                        double gnorm) {
    if (!comm_any_failed(!isfinite(sl->loss_sum) || !isfinite(sl->term_loss)) && isfinite(gnorm)) return 0;
    char what[128];
    snprintf(what, sizeof what, "non-finite %s (grad_norm %g)", isfinite(gnorm) ? "loss" : "gradient norm", gnorm);
    return stop_nonfinite(r, ck, step, what, TRAIN_HINT);
}

// Evaluate (logged first, a non-finite loss as null); a NaN/Inf evaluation loss on any rank stops every rank like a
// training one, before this step's save: the stop message and 1.
static int evaluate(os_sft_state *r, const os_sft_checkpoint_opts *ck, int64_t step, double epoch) {
    double loss;
    os_stop_if_failed(os_sft_eval(&r->trainer, &r->eval, &r->log, step, epoch, &loss));
    if (r->rank == 0) os_ckpt_keeper_eval(&r->keep, step, loss);
    if (!comm_any_failed(!isfinite(loss))) return 0;
    char what[128];
    snprintf(what, sizeof what, "non-finite evaluation loss (eval_loss %g; the training loss was finite)", loss);
    return stop_nonfinite(r, ck, step, what, "the evaluation data may use weights that training does not reach: check "
                          "--val_dataset; or try a smaller --learning_rate");
}

// clip to --max_grad_norm, AdamW at the scheduled learning rate; returns the rate
static double optimizer_step(os_sft_state *r, const os_sft_training_opts *t, int64_t step, double gnorm) {
    float clip = 1.0f;
    if (t->max_grad_norm > 0) {
        double c = t->max_grad_norm / (gnorm + 1e-6);
        if (c < 1.0) clip = (float)c;
    }
    double lr = os_lr_at(t->lr_scheduler_type, t->learning_rate, step - 1, r->warmup, r->total);
    zr_adamw_step(&r->s.rt, (float)lr, (float)t->adam_beta1, (float)t->adam_beta2, (float)t->adam_epsilon,
                  (float)t->weight_decay, clip, step - r->adam_base);
    return lr;
}

// move the data position past the step's samples (the test hook's log_samples: their ids in logging.jsonl); returns
// the epochs completed (the logged `epoch`)
static double advance(os_sft_state *r, const os_sft_debug_opts *dbg) {
    int64_t took = os_data_take(&r->cur, r->nsamp, r->GB);
    if (dbg->log_samples) r->log.sample_ids = os_loader_stream(&r->train), r->log.n_sample_ids = took;
    r->seen += took;
    os_data_advance(&r->cur, r->nsamp, r->GB);
    r->run.next = r->cur, r->run.samples_seen = r->seen;
    return (double)r->cur.epoch + (double)r->cur.pos / (double)r->nsamp;
}

// One optimizer step: micro-batches, reduce, norm, (non-finite stop), clip + AdamW, log, evaluate, save.
// Returns 0, or the exit code of a non-finite stop.
static int train_step(os_sft_state *r, int64_t step, const os_sft_training_opts *tr, const os_sft_checkpoint_opts *ck,
                      const os_sft_logging_opts *lg, const os_sft_debug_opts *dbg) {
    os_stop_boundary(step - 1);   // a signal or a failed write on any rank ends every rank here (collective)
    os_stop_step(step, r->total);
    double t0 = os_now(), cpu0 = os_cpu_now();
    comm_set_step(step);
    os_test_fault(r->rank, step);   // the test hook OMNISHARD_FAULT (core/knobs.h)
    micro_report sl;
    micro_batches(r, tr, dbg, step, &sl);
    zr_reduce_grads(&r->s.rt);
    if (dbg->dump_grads && step == 1) os_stop_if_failed(os_dump_grads(&r->s.rt, dbg->dump_grads));
    double gnorm = zr_grad_norm(&r->s.rt, r->bucket_norms);
    if (check_finite(r, ck, step, &sl, gnorm)) return 1;
    double lr = optimizer_step(r, tr, step, gnorm);
    double epoch = advance(r, dbg);
    phase_times(r, &sl, cpu0);
    os_steplog_step(&r->log, r->m, step, epoch, sl.loss_sum, sl.nonempty, sl.term_loss, &sl.acc, lr, gnorm,
                    r->bucket_norms, os_now() - t0, &r->s.rt,
                    lg->logging_steps > 0 && (step % lg->logging_steps == 0 || step == r->total));
    int epoch_end = r->cur.pos == 0;   // os_data_advance moved to the next epoch's start
    if (r->ev && os_sft_eval_due(tr, ck->save_steps, step, r->total, epoch_end) && evaluate(r, ck, step, epoch))
        return 1;
    return save_due(ck, step, epoch_end) ? save(r, ck, step) : 0;
}

// ms-swift's closing `last_model_checkpoint: DIR` line, with how transformers and PEFT load that directory (the
// consolidated model and, under LoRA, the adapter beside it as ms-swift's; without the consolidated copy, the export line)
static void last_checkpoint(const os_sft_checkpoint_opts *ck, const os_sft_model_opts *mo, int64_t saved) {
    if (saved <= 0) return;   // --save_strategy no: no checkpoint
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/checkpoint-%lld", ck->output_dir, (long long)saved);
    if (!ck->save_consolidated)
        os_info("omnishard sft: last_model_checkpoint: %s (rank files only: `omnishard export --checkpoint %s` writes "
                "the model transformers loads)", dir, dir);
    else if (!strcmp(mo->train_type, "lora"))
        os_info("omnishard sft: last_model_checkpoint: %s (transformers with PEFT installed: "
                "AutoModelForCausalLM.from_pretrained('%s') is the base with the LoRA adapter; or "
                "PeftModel.from_pretrained(base, '%s'))", dir, dir, dir);
    else
        os_info("omnishard sft: last_model_checkpoint: %s (transformers: AutoModelForCausalLM.from_pretrained('%s'))",
                dir, dir);
}

// after the last step: the final checkpoint (unless the last step saved one), final_model, and rank 0's after
static int save_final(os_sft_state *r, os_sft_after_fn after, const os_sft_data_opts *d,
                      const os_sft_checkpoint_opts *ck, const os_sft_model_opts *mo) {
    if (r->start <= r->total && r->log.targets_total == 0)   // the same value on every rank (reduced each step)
        os_die("no step had a target token: every sample was skipped or has no trained position (%lld skipped; "
               "--max_length %lld, --truncation_strategy %s; docs/dataset.md); no model written",
               (long long)os_dataset_skipped_total(r->ds, comm_allreduce_max_i64), (long long)d->max_length,
               d->truncation_strategy);
    if (strcmp(ck->save_strategy, "no") && r->saved < r->total && save(r, ck, r->total)) return 1;
    char out[4200];
    snprintf(out, sizeof out, "%s/final_model", ck->output_dir);
    os_stop_if_failed(os_export(r->m, &r->s.rt, mo->model, out, &r->dest.exp));
    int failed = 0;
    if (r->rank == 0 && after && after(ck->output_dir, r->log.fd) < 0)
        failed = 1, os_info("omnishard sft: %s (the model and checkpoints are written)", os_errmsg());
    os_stop_if_failed(os_steplog_close(&r->log));   // the log's last lines are on disk
    if (r->rank == 0) os_info("omnishard sft: done; model written to %s", out);
    if (r->rank == 0) last_checkpoint(ck, mo, r->saved);
    os_sft_report_skips(r->ds, r->ev, d);
    return failed;
}

// transformers' closing line: this run's seconds (its steps and saves, final_model included), the mean of its step
// losses, samples and steps per second, the epochs reached
static void summary(const os_sft_state *r, double seconds, int64_t samples) {
    int64_t steps = r->total - r->start + 1;
    double s = seconds > 0 ? seconds : 1e-9;
    char loss[32] = "nan";
    if (r->log.run_steps) snprintf(loss, sizeof loss, "%.4f", r->log.run_loss / (double)r->log.run_steps);
    os_info("omnishard sft: {'train_runtime': %.4f, 'train_samples_per_second': %.3f, 'train_steps_per_second': %.3f, "
            "'train_loss': %s, 'epoch': %.2f}", seconds, (double)samples / s, (double)(steps > 0 ? steps : 0) / s, loss,
            (double)r->cur.epoch + (double)r->cur.pos / (double)r->nsamp);
}

int os_sft_run(const os_sft_args *given, os_sft_after_fn after) {
    // the run's options: output_dir the run directory (--add_version: a new vN-... in it; train/rundir.h)
    char run_dir[4200];
    os_rundir_version(given->checkpoint.output_dir, given->checkpoint.add_version, run_dir, sizeof run_dir);
    os_sft_args run = *given;
    run.checkpoint.output_dir = run_dir;
    const os_sft_args *a = &run;
    os_sft_state r;
    os_sft_open(&r, a);
    os_stop_if_failed(r.rank == 0 ? os_args_json_write(a, &r) : 0);   // the run's settings, as resolved
    int exit_code = 0;
    double t0 = os_now();
    int64_t seen0 = r.seen;
    for (int64_t step = r.start; step <= r.total && !exit_code; step++)
        exit_code = train_step(&r, step, &a->training, &a->checkpoint, &a->logging, &a->debug);
    if (!exit_code) {
        os_stop_boundary(r.total);
        os_stop_final(0);
        os_test_fault(r.rank, 0);   // step 0: the start of the final save
        exit_code = save_final(&r, after, &a->data, &a->checkpoint, &a->model);
        if (!exit_code) os_stop_final(1);
    }
    if (!exit_code && r.rank == 0) summary(&r, os_now() - t0, r.seen - seen0);
    if (!exit_code) os_test_fault(r.rank, r.total + 1);   // step total + 1: after the work, before MPI_Finalize
    if (exit_code) os_stop_if_failed(os_steplog_close(&r.log));
    os_sft_close(&r);
    return exit_code;
}
