#include "train/sft_open.h"
#include "train/ds_config.h"
#include "core/alloc.h"
#include "core/device.h"
#include "core/err.h"
#include "core/knobs.h"
#include "core/rng.h"
#include "dataset/pack.h"
#include "dataset/pretok.h"
#include "io/dirlock.h"
#include "train/rundir.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "train/agree.h"
#include "train/data_check.h"
#include "train/evaluate.h"
#include "train/stop.h"
#include "zero/comm.h"
#include <math.h>
#include <stdarg.h>
#include "io/hfconfig.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// the start-up agreement on inputs (the options were agreed on in cmd_sft): the model's config.json here, the
// data files once read (os_dataset.digest, hashed while they were read)
static void agree_on_config(const char *model) {
    char cfg[4200], v[128];
    snprintf(cfg, sizeof cfg, "%s/config.json", model);
    os_file_digest_text(cfg, v, sizeof v);
    const char *name = "the model's config.json", *val = v;
    if (os_agree_values(&name, &val, 1) < 0) os_die_err();
}

// each file of a mix by name, then the mix itself (its digest covers the sampling: #N, shuffle, --data_seed)
static void agree_on_data(os_dataset *train, os_dataset *eval) {
    enum { MAXV = 2 * (OS_MAX_SOURCES + 1) };
    static char name[MAXV][4200], v[MAXV][128];
    const char *names[MAXV], *vals[MAXV];
    int n = 0;
    for (int e = 0; e < 2; e++) {
        os_dataset *d = e ? eval : train, *src[OS_MAX_SOURCES];
        const char *what = e ? "--val_dataset" : "--dataset";
        if (!d) continue;
        int ns = os_dataset_sources(d, src), mixed = ns > 1 || src[0] != d;
        for (int k = 0; k < ns + mixed; k++, n++) {
            const os_dataset *x = k < ns ? src[k] : d;
            if (k < ns) snprintf(name[n], sizeof name[n], "the %s file %s", what, x->path);
            else snprintf(name[n], sizeof name[n], "the %s mix '%s' (its sampling)", what, d->path);
            os_digest_text(x->bytes, x->digest, v[n], sizeof v[n]);
            names[n] = name[n], vals[n] = v[n];
        }
    }
    if (os_agree_values(names, vals, n) < 0) os_die_err();
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

// the --dataset list as given (shown next to its digest in resume messages)
static void dataset_text(const os_sft_data_opts *d, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < d->ndatasets && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? " " : "", d->datasets[i]);
}

// a checkpoint from before --data_seed existed: its data order came from --seed
static void data_seed_was_seed(os_ckpt_run *was) {
    for (int j = 0; j < was->n; j++)
        if (!strcmp(was->key[j], "--data_seed")) return;
    for (int j = 0; j < was->n && was->n < OS_RUN_KEYS; j++)
        if (!strcmp(was->key[j], "--seed")) {
            snprintf(was->key[was->n], sizeof was->key[0], "--data_seed");
            memcpy(was->val[was->n++], was->val[j], sizeof was->val[0]);
            return;
        }
}

#define TASK_SYSTEM "(the task's default)"
// a setting a checkpoint from before it existed does not record: the value it trained with
static void was_default(os_ckpt_run *was, const char *key, const char *val) {
    for (int j = 0; j < was->n; j++)
        if (!strcmp(was->key[j], key)) return;
    if (was->n < OS_RUN_KEYS) run_set(was, key, "%s", val);
}

// --system as recorded: the text, or its FNV-1a 64 when longer than a record's value holds
static void run_system(const os_sft_data_opts *d, os_ckpt_run *r) {
    if (!d->system) run_set(r, "--system", TASK_SYSTEM);
    else if (strlen(d->system) < sizeof r->val[0] - 1) run_set(r, "--system", "%s", d->system);
    else run_set(r, "--system", "%zu bytes, fnv1a64 %016llx", strlen(d->system),
                 (unsigned long long)os_fnv1a(OS_FNV_BASIS, d->system, strlen(d->system)));
}

// the settings as given: the data's, --seed and --model_type
static void run_args(const os_sft_data_opts *d, int64_t seed, const char *model_type, os_ckpt_run *r) {
    memset(r, 0, sizeof *r);
    dataset_text(d, r->dataset, sizeof r->dataset);
    run_set(r, "--seed", "%lld", (long long)seed);
    run_set(r, "--data_seed", "%lld", (long long)d->data_seed);
    run_set(r, "--max_length", "%lld", (long long)d->max_length);
    run_set(r, "--truncation_strategy", "%s", d->truncation_strategy);
    run_set(r, "--split_dataset_ratio", "%.17g", d->split_dataset_ratio);
    run_set(r, "--model_type", "%s", model_type);
    run_set(r, "--packing", "%s", d->packing ? "true" : "false");
    run_system(d, r);
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



// the session's model from the model section (the rest of the session's settings from the other sections, by the
// caller); -1 + message (an unknown --target_modules name)
static int session_model(const os_sft_model_opts *mo, os_session_opts *o) {
    *o = (os_session_opts){.model = mo->model, .speech_encoder = mo->speech_encoder, .slam = !strcmp(mo->model_type, "slam_omni"),
                           .code_layer = mo->code_layer, .num_latency_tokens = mo->num_latency_tokens,
                           .do_layershift = mo->do_layershift, .loss_weights = mo->loss_weights,
                           .n_loss_weights = mo->n_loss_weights, .new_rows_init = mo->new_rows_init,
                           .freeze = {mo->freeze_llm, mo->freeze_encoder_projector, mo->freeze_group_decode_adapter,
                                      mo->trainable_embed_rows}};
    if (mo->train_type && !strcmp(mo->train_type, "lora")) {
        o->lora = (os_lora_config){mo->lora_rank, (float)mo->lora_alpha, (float)mo->lora_dropout, 0};
        if (os_lora_parse_targets(mo->target_modules, &o->lora.targets) < 0) return -1;
    }
    return 0;
}

void os_sft_resolve_model_defaults(os_sft_model_opts *mo) {
    os_session_opts so;
    os_qwen2_config cfg;
    os_omni_config oc;
    if (session_model(mo, &so) < 0 || os_session_model_config(&so, &cfg, &oc) < 0)
        return;   // left as given: opening the model names the cause on every rank
    if (so.slam) {
        if (mo->code_layer < 0) mo->code_layer = oc.G;
        if (mo->num_latency_tokens < 0) mo->num_latency_tokens = oc.latency;
        if (mo->do_layershift < 0) mo->do_layershift = oc.layershift;
        if (!mo->n_loss_weights) {
            mo->n_loss_weights = oc.G + 1;
            for (int i = 0; i <= oc.G; i++) mo->loss_weights[i] = oc.loss_w[i];
        }
    }
    mo->trainable_embed_rows = os_freeze_embed_rows(&so.freeze, so.lora.rank > 0, oc.G);
}

// --head_balance as the run takes it
static int head_balance_of(const os_sft_parallelism_opts *p, const os_sft_device_opts *d) {
    if (p->head_balance >= 0) return p->head_balance;   // given
    // not given: on where the backend's memory is the host's; where it is not, moving rows costs a download and an
    // upload of the rows and sums every micro-batch, so they stay. The guard backend (--device guard, a test
    // backend: the CPU kernels with the memory of a device) keeps the CPU's choice, so that a run on it computes the
    // CPU backend's numbers for the same options
    int index;
    return os_k->host_memory || os_device_parse(d->device, &index) == OS_DEVICE_GUARD;
}

// the trainer over the session: what a micro-step works on, and the parameter loss terms (each --param_loss prefix
// must name some parameter); -1 + message
static int trainer_open(os_sft_state *r, const os_sft_training_opts *tr, const os_sft_parallelism_opts *p,
                        const os_sft_device_opts *dev) {
    os_model *m = &r->s.model;
    os_trainer *t = &r->trainer;
    t->m = m, t->rt = &r->s.rt, t->head_balance = head_balance_of(p, dev);
    t->train_opts = (os_model_opts){.recompute = tr->gradient_checkpointing, .lora_dropout = m->oc.lora.dropout};
    t->eval_opts = (os_model_opts){0};
    t->acts = &r->s.acts;
    t->speech = r->s.speech.on ? &r->s.speech : NULL;
    t->terms = (os_param_term *)tr->terms, t->nterms = tr->nterms;
    for (int k = 0; k < tr->nterms; k++) {
        int hit = 0;
        for (int i = 0; i < m->reg.np; i++) hit |= !strncmp(m->reg.p[i].name, tr->terms[k].prefix, strlen(tr->terms[k].prefix));
        if (!hit) return os_errf("--param_loss: no parameter name starts with '%s'", tr->terms[k].prefix);
    }
    if (tr->nterms) t->term_vals = os_k->alloc((int64_t)sizeof(double) * m->reg.np * tr->nterms, "parameter term sums");
    return 0;
}

// before anything is opened: the ranks agree on the model's config.json and --model and --speech_encoder are model
// directories (named with what one holds and how to get one); rank 0's notes on the options (stage 0 over several
// ranks, the --deepspeed file's, ms-swift's options given that change nothing here: known_given)
static void check_model(const os_sft_state *r, const os_sft_model_opts *mo, const os_sft_parallelism_opts *p,
                        const unsigned char *known_given) {
    if (p->zero_stage == 0 && r->N > 1 && r->rank == 0)
        os_info("note: stage 0 replicates everything on each of the %d ranks (--deepspeed zero3 shards it)", r->N);
    agree_on_config(mo->model);
    if (p->ds_notes && r->rank == 0) os_info("omnishard sft: %s", p->ds_notes);
    os_sft_swift_notes(known_given, "sft");
    os_stop_if_failed(os_model_dir_check("--model", mo->model, NULL) < 0 ? -1
                      : os_model_dir_check("--speech_encoder", mo->speech_encoder, NULL));
}

// one run per output directory: locked before anything in it is touched (docs/operations.md), and never two runs
// mixed in one: a used directory is refused unless this run resumes its checkpoint (TensorBoard's runs/ in it
// unless --logging_dir puts it elsewhere); then the stop handlers
static void claim_output_dir(const os_sft_state *r, const os_sft_checkpoint_opts *ck, const os_sft_logging_opts *lg) {
    os_stop_if_failed(r->rank == 0 ? os_dir_lock(ck->output_dir) : 0);
    int tb = strcmp(lg->report_to, "none") && !lg->logging_dir;
    os_stop_if_failed(r->rank == 0 ? os_rundir_claim(ck->output_dir, ck->resume_from_checkpoint,
                                                       ck->overwrite_output_dir, tb) : 0);
    os_stop_install();
}

// a resumed run: the settings that decide whether the model and data can be opened checked against the
// checkpoint's (the data section, --seed, --model_type, --code_layer given)
static void check_resume(os_sft_state *r, const os_sft_checkpoint_opts *ck, const os_sft_data_opts *d,
                         const os_sft_model_opts *mo, int64_t seed) {
    run_args(d, seed, mo->model_type, &r->run);
    if (mo->code_layer >= 0) run_set(&r->run, "--code_layer", "%d", mo->code_layer);
    int rc = os_checkpoint_read_run(ck->resume_from_checkpoint, &r->was);
    if (rc == 0) data_seed_was_seed(&r->was), was_default(&r->was, "--system", TASK_SYSTEM);
    if (rc == 0) was_default(&r->was, "--packing", "false");   // before --packing: unpacked
    os_stop_if_failed(rc);
    // differing settings are named once the dataset's digest is known too, in one message with it; should
    // opening the model or the data fail first, the stop message names them beside that failure
    if (os_checkpoint_check_run(ck->resume_from_checkpoint, &r->was, &r->run, ck->resume_override_config) < 0)
        os_stop_note(os_errmsg());
}

// the session's options, from the sections that set them
static void session_opts(const os_sft_model_opts *mo, const os_sft_data_opts *d, const os_sft_parallelism_opts *p,
                         const os_sft_training_opts *tr, os_session_opts *so) {
    os_stop_if_failed(session_model(mo, so));
    so->cache_speech_features = d->cache_speech_features, so->zero_stage = p->zero_stage;
    so->bf16 = os_sft_args_bf16(tr), so->seed = (uint64_t)tr->seed;
}

// the model declared: its configuration and tensor headers read and checked, its parameters declared and frozen as
// asked, no weight read yet (session/session.h)
static void declare_model(os_sft_state *r, const os_session_opts *so) {
    os_stop_if_failed(os_session_declare(&r->s, so));
    r->m = &r->s.model;
}

// the model's weights loaded (the runtime, the speech path) and the trainer over it
static void load_model(os_sft_state *r, const os_session_opts *so, const os_sft_training_opts *tr,
                       const os_sft_parallelism_opts *p, const os_sft_device_opts *dev) {
    os_stop_if_failed(os_session_load(&r->s, so, r->rank, r->N));
    r->s.speech.write_failed = os_stop_write_failed;   // a failed feature-cache write ends the run at the step boundary
    os_stop_if_failed(trainer_open(r, tr, p, dev));
}

// --packing true: the training samples as packed rows (the evaluation data stays unpacked); every rank forms the
// same rows from the same samples
static void pack_training(os_sft_state *r, const os_sft_data_opts *d, int64_t Bm, int log_samples) {
    int64_t n = r->ds->n;
    int rc = 0;
    if (log_samples)
        rc = os_errf("--packing true with OMNISHARD_LOG_SAMPLES=1: the ids of a step would be packed rows, not "
                     "samples; leave one of them out");
    os_dataset *p = rc == 0 ? os_pack_open(r->ds, d->max_length) : NULL;
    if (p && Bm > p->live)
        rc = os_errf("--per_device_train_batch_size %lld: at most %lld packed rows with --packing true", (long long)Bm,
                     (long long)p->live);
    os_stop_if_failed(p && rc == 0 ? 0 : -1);
    r->ds = p;
    if (r->rank == 0)
        os_info("omnishard sft: --packing true: %lld training samples in %lld rows of up to %lld positions", (long long)n,
                (long long)p->n, (long long)d->max_length);
}

// the datasets read (the model declared, its weights not read yet: a record the model cannot take, such as a spoken
// question without a speech encoder, is named at once), agreed on, and checked: what --max_length skips or cuts counted, and the run
// stopped on every rank when nothing can train (train/data_check.h)
static void open_data(os_sft_state *r, const os_sft_data_opts *data, const os_sft_model_opts *mo, int64_t Bm) {
    int64_t T_s = os_speech_positions(r->m);
    os_stop_if_failed(os_sft_datasets(data, mo, Bm, &r->m->oc, T_s, &r->ds, &r->ev));
    agree_on_data(r->ds, r->ev);
    os_digest_text(r->ds->bytes, r->ds->digest, r->digest, sizeof r->digest);
    for (int e = 0; e < 2; e++) {   // each file of a mix
        os_dataset *d = e ? r->ev : r->ds, *src[OS_MAX_SOURCES];
        for (int k = 0, ns = d ? os_dataset_sources(d, src) : 0; k < ns; k++) os_stop_if_failed(os_pretok_speech_len(src[k], T_s));
    }
    os_data_check(r->ds, "training", data->max_length, data->truncation_strategy);
}

// the evaluation split (--split_dataset_ratio), packing and the loaders over the model
static void open_loaders(os_sft_state *r, const os_sft_data_opts *d, const os_sft_training_opts *tr,
                         const os_sft_parallelism_opts *p, int log_samples) {
    int64_t Bm = tr->per_device_train_batch_size;
    os_stop_if_failed(os_sft_split(d, tr->eval_steps, &r->ds, &r->ev));
    if (d->packing) pack_training(r, d, Bm, log_samples);
    r->nsamp = r->ds->n, r->K = tr->gradient_accumulation_steps, r->GB = (int64_t)r->N * r->K * Bm;
    os_stop_if_failed(os_ds_config_check_batch(p, tr, r->N, r->GB));
    os_loader_open(&r->train, r->ds, r->m, &r->s.speech, r->s.pad_id, Bm, 1, (uint64_t)d->data_seed);
    if (r->ev) os_loader_open(&r->eval, r->ev, r->m, &r->s.speech, r->s.pad_id, Bm, 0, 0);
}

// a resumed run: the model's code layers and loss weights checked (the rest was checked before opening), and the
// data position; then this run's settings as its checkpoints record them
static void data_position(os_sft_state *r, const os_sft_checkpoint_opts *ck, const os_sft_data_opts *d,
                          const os_sft_model_opts *mo, int64_t seed) {
    if (ck->resume_from_checkpoint) {
        os_ckpt_run late = {.n = 0};   // every setting (the options' differences warned of already under override)
        if (!ck->resume_override_config) run_args(d, seed, mo->model_type, &late);
        dataset_text(d, late.dataset, sizeof late.dataset);
        run_model(r->m, r->digest, &late);
        os_stop_note(NULL);
        os_stop_if_failed(os_checkpoint_check_run(ck->resume_from_checkpoint, &r->was, &late, ck->resume_override_config));
        r->done = r->was.step, r->cur = r->was.next, r->seen = r->was.samples_seen;
        if (r->cur.pos >= r->nsamp) r->cur.epoch++, r->cur.pos = 0;   // (a smaller dataset under --resume_override_config)
    }
    run_args(d, seed, mo->model_type, &r->run);
    run_model(r->m, r->digest, &r->run);
    r->run.samples = r->nsamp, r->run.global_batch = r->GB;
    r->dest = (os_ckpt_dest){ck->output_dir, mo->model, seed, ck->save_only_model, ck->save_consolidated,
                             {.merge_lora = ck->merge_lora, .max_shard_bytes = ck->max_shard_size}};
    os_stop_if_failed(os_export_dtype(ck->save_dtype, mo->model, &r->dest.exp.dtype));   // the same on every rank
}

// the last step (--max_steps, or where --num_train_epochs ends the stream) and the warm-up
static void count_steps(os_sft_state *r, const os_sft_training_opts *tr, int resuming, int packing, int zero_stage) {
    r->total = tr->max_steps > 0 ? tr->max_steps
                                 : r->done + os_data_steps(r->cur, os_data_end(tr->num_train_epochs, r->nsamp), r->nsamp, r->GB);
    if (r->total < 1 && !resuming) r->total = 1;
    r->warmup = tr->warmup_steps > 0 ? tr->warmup_steps : (int64_t)ceil(tr->warmup_ratio * (double)r->total);
    if (r->rank == 0)
        os_info("omnishard sft: %lld %s, %d rank(s), ZeRO stage %d, %lld steps (%lld per epoch), global batch %lld, "
                "%lld parameters (%lld trained)",
                (long long)r->nsamp, packing ? "packed rows" : "samples", r->N, zero_stage, (long long)r->total, (long long)((r->nsamp + r->GB - 1) / r->GB),
                (long long)r->GB, (long long)os_reg_numel(&r->m->reg, 0), (long long)os_reg_numel(&r->m->reg, 1));
    char knobs[1024];
    os_knobs_describe(knobs, sizeof knobs);
    if (r->rank == 0 && strcmp(knobs, "(none)")) os_info("omnishard sft: environment settings: %s", knobs);
    if (r->rank == 0 && os_sft_args_bf16(tr))
        os_info("omnishard sft: bf16 mixed precision: matrix products on bf16-rounded inputs with fp32 accumulation "
                "(%s); weights, gradients, their reduction and AdamW in fp32", k_gemm_bf16_impl());
}

// the resumed checkpoint's parameters and moments (none after --save_only_model: AdamW restarts)
static void load_checkpoint(os_sft_state *r, const os_sft_checkpoint_opts *ck) {
    int64_t loaded = 0;
    os_stop_if_failed((ck->resume_only_model ? os_checkpoint_load_params : os_checkpoint_load)(r->m, &r->s.rt,
                                                                     ck->resume_from_checkpoint, &loaded));
    r->start = r->done + 1;
    if (r->rank == 0)
        os_info("resumed from %s at step %lld: epoch %lld, sample position %lld of %lld (%lld samples trained on; global "
                "batch %lld, was %lld)", ck->resume_from_checkpoint, (long long)r->done, (long long)r->cur.epoch,
                (long long)r->cur.pos, (long long)r->nsamp, (long long)r->seen, (long long)r->GB,
                (long long)r->was.global_batch);
    if (ck->resume_only_model) {
        r->adam_base = r->done;   // as below, by request
        if (r->rank == 0)
            os_info("omnishard: --resume_only_model: the parameters of %s only; the AdamW moments start from zero "
                    "(bias correction restarts at 1), the step, data position and schedule continue", ck->resume_from_checkpoint);
    } else if (!r->was.optimizer_state) {
        r->adam_base = r->done;   // zero moments: the bias correction restarts with them
        if (r->rank == 0)
            os_info("omnishard: WARNING: %s was saved with --save_only_model: it holds no optimizer state, so the "
                    "AdamW moments START FROM ZERO (bias correction restarts at 1); this is not the same run as an "
                    "uninterrupted one", ck->resume_from_checkpoint);
    }
    os_stop_checkpoint(ck->resume_from_checkpoint, r->done);
}

// this run in its checkpoints' lineage; rank 0: the unfinished checkpoints a crash left removed, and
// --save_total_limit's keeper over the output directory's checkpoints
static void open_checkpoints(os_sft_state *r, const os_sft_checkpoint_opts *ck) {
    os_ckpt_new_run(&r->run, ck->resume_from_checkpoint ? &r->was : NULL);
    if (r->rank == 0) os_checkpoint_cleanup(ck->output_dir);
    if (r->rank == 0) os_ckpt_keeper_init(&r->keep, ck->output_dir, ck->save_total_limit, &r->run);
}

// logging.jsonl in the output directory (a resumed run's cut at its step), and TensorBoard's event file with
// --report_to tensorboard or all (docs/training.md "TensorBoard": --logging_dir, else OUTPUT_DIR/runs)
static void open_log(os_sft_state *r, const os_sft_checkpoint_opts *ck, const os_sft_logging_opts *lg) {
    os_stop_if_failed(os_steplog_open(&r->log, ck->output_dir, r->rank == 0, r->total,
                                      ck->resume_from_checkpoint ? r->done : -1));
    if (strcmp(lg->report_to, "none")) {
        char dir[4300];
        snprintf(dir, sizeof dir, "%s/runs", ck->output_dir);
        os_stop_if_failed(os_steplog_tensorboard(&r->log, lg->logging_dir ? lg->logging_dir : dir));
    }
}

void os_sft_open(os_sft_state *r, const os_sft_args *a) {
    memset(r, 0, sizeof *r);
    r->rank = comm_rank(), r->N = comm_size(), r->start = 1;
    check_model(r, &a->model, &a->parallelism, a->known_given);
    claim_output_dir(r, &a->checkpoint, &a->logging);
    if (a->checkpoint.resume_from_checkpoint) check_resume(r, &a->checkpoint, &a->data, &a->model, a->training.seed);
    os_session_opts so;
    session_opts(&a->model, &a->data, &a->parallelism, &a->training, &so);
    declare_model(r, &so);
    os_stop_boundary(0);   // a signal in any phase of the start-up stops the run at its end (and within the long ones)
    os_test_fault(r->rank, -1);   // the test hook's step -1: before the datasets are opened
    open_data(r, &a->data, &a->model, a->training.per_device_train_batch_size);
    os_stop_boundary(0);
    load_model(r, &so, &a->training, &a->parallelism, &a->device);
    os_stop_boundary(0);
    open_loaders(r, &a->data, &a->training, &a->parallelism, a->debug.log_samples);
    data_position(r, &a->checkpoint, &a->data, &a->model, a->training.seed);
    count_steps(r, &a->training, a->checkpoint.resume_from_checkpoint != NULL, a->data.packing,
                a->parallelism.zero_stage);
    open_checkpoints(r, &a->checkpoint);
    if (a->checkpoint.resume_from_checkpoint) load_checkpoint(r, &a->checkpoint);
    os_stop_boundary(0);
    open_log(r, &a->checkpoint, &a->logging);
    r->saved = r->start - 1;
    r->bucket_norms = os_alloc(sizeof(double) * (size_t)r->m->reg.nb, "bucket grad norms");
}

void os_sft_close(os_sft_state *r) {
    os_loader_close(&r->train);
    if (r->ev) os_loader_close(&r->eval);
    os_free(r->bucket_norms);
    os_k->free(r->trainer.term_vals);
    os_ckpt_keeper_free(&r->keep);
    r->ds->free(r->ds);
    if (r->ev) r->ev->free(r->ev);
    os_session_close(&r->s);
}
