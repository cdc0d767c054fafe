// omnishard infer --dataset FILE --output_file OUT (infer_run.h): every record of a test set decoded, one JSON line
// each, in dataset order (docs/inference.md "A whole test set").
#include "infer/infer_dataset.h"
#include "infer/infer_lines.h"
#include "infer/infer_output.h"
#include "infer/infer_speech.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/timer.h"
#include "zero/comm.h"
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    int64_t records, errors, steps, text, audio, stops[3];   // stops: eot, eoa, max_new_tokens; errors: error lines
} tally;

static void progress(const tally *t, int64_t done, int64_t n, double t0, int last) {
    static double shown;
    double now = os_now(), sec = now - t0;
    if (!last && now - shown < 1.0) return;
    shown = now;
    double rps = sec > 0 ? (double)t->records / sec : 0.0;
    os_info("omnishard infer: %lld/%lld records, %.2f records/s, %.1f tokens/s, ETA %.0f s", (long long)done,
            (long long)n, rps, sec > 0 ? (double)t->steps / sec : 0.0, rps > 0 ? (double)(n - done) / rps : 0.0);
}

// --on_error skip (the default is stop)
static int skipping(const infer_args *a) { return a->on_error && !strcmp(a->on_error, "skip"); }

// what a record adds to the summary, exchanged between the ranks with its line's length
typedef struct {
    int64_t len, failed, steps, text, audio, stop;
} rec_stats;

static void count(tally *t, const rec_stats *r) {
    t->records++;
    if (r->failed) t->errors++;
    else t->steps += r->steps, t->text += r->text, t->audio += r->audio, t->stops[r->stop]++;
}

// a record of this rank's round
typedef struct {
    int64_t i;           // the record (>= ds->n: none, a short last round)
    os_infer_prompt p;   // its prompt (with its projector output)
    char *why;           // why it cannot be decoded (malloc'd), or NULL
    char *line;          // its output or error line (malloc'd), st.len bytes
    rec_stats st;
} slot;

// the run: S streams of records (S = the ranks when they split them, else 1); this rank decodes stream `mine`:
// records base + j*S + mine of each round
typedef struct {
    os_session *s;
    os_dataset *ds;
    const os_tokenizer *tok;
    const infer_args *a;
    const os_gen_opts *g;
    os_infer_out *out;   // rank 0: the output file
    int S, mine;
    int64_t W, K;        // slots per round (records per stream), records per encoder batch
    slot *sl;            // [W]
    int64_t *good;       // [W] the slots the batched engine decodes (--infer_batch_size > 1)
} run;

static char *dup_msg(const char *m) {
    size_t n = strlen(m);
    char *s = os_alloc(n + 1, "record error message");
    memcpy(s, m, n + 1);
    return s;
}

// The round's prompts on this rank (checked), then their spoken questions through the encoder and the projector K
// at a time (collective unless g->local: every rank has the same number of slots, so the same number of batches)
static void prepare(const run *c, int64_t nw) {
    os_infer_prompt **ps = os_alloc(sizeof(os_infer_prompt *) * (size_t)(nw + 1), "round prompts");
    char **why = os_alloc(sizeof(char *) * (size_t)(nw + 1), "round errors");
    int64_t *index = os_alloc(sizeof(int64_t) * (size_t)(nw + 1), "round records"), *at = os_alloc(sizeof(int64_t) * (size_t)(nw + 1), "round slots");
    for (int64_t j = 0; j < nw; j++) {
        slot *x = &c->sl[j];
        if (x->i >= c->ds->n) continue;
        if (os_infer_prompt_record(&x->p, c->ds, x->i) < 0 || os_infer_prompt_check(&c->s->model, &x->p) < 0)
            x->why = dup_msg(os_errmsg());
    }
    for (int64_t j0 = 0; j0 < nw; j0 += c->K) {
        int64_t k = 0;
        for (int64_t j = j0; j < nw && j < j0 + c->K; j++)
            if (c->sl[j].i < c->ds->n && !c->sl[j].why) at[k] = j, index[k] = c->sl[j].i, why[k] = NULL, ps[k++] = &c->sl[j].p;
        os_infer_speech_batch(c->s, ps, k, index, c->g->local, why);
        for (int64_t q = 0; q < k; q++) c->sl[at[q]].why = why[q];
    }
    os_free(ps), os_free(why), os_free(index), os_free(at);
}

// slot x failed (msg): named on stderr (by the rank that decoded it; rank 0 when every rank decoded it), its error
// line
static void failed(const run *c, slot *x, const char *msg) {
    char m[4600];
    os_infer_record_message(c->ds, x->i, msg, m, sizeof m);
    const char *note = skipping(c->a) ? " (--on_error skip: an error line written for it)" : "";
    if (c->S > 1 && os_rank >= 0) fprintf(stderr, "omnishard infer: rank %d: %s%s\n", os_rank, m, note);
    else if (comm_rank() == 0) fprintf(stderr, "omnishard infer: %s%s\n", m, note);
    size_t len = 0;
    x->st = (rec_stats){.failed = 1};
    x->line = os_infer_error_line(c->ds, x->i, m, &len);
    x->st.len = x->line ? (int64_t)len : 0;
}

// a decoded slot's line and stats; -1 + message
static int decoded(const run *c, slot *x, const os_gen_result *r, double sec) {
    int text_only = c->g->text_only || x->p.asr;
    size_t len = 0;
    x->st = (rec_stats){.steps = r->steps, .text = r->ntext, .audio = r->naudio, .stop = os_infer_stop_reason(r, text_only)};
    x->line = os_infer_line(c->ds, x->i, c->tok, &c->s->model, &x->p, r, text_only, c->a->show_prompt, sec, &len);
    x->st.len = (int64_t)len;
    return x->line ? 0 : -1;
}

// one at a time: the slot's record (with lockstep, a slot without a record or with a failed one still takes part in
// the forwards). -1 + message only for what stops every rank (not the record's own failures)
static void decode_one(const run *c, slot *x) {
    os_gen_result r = {0};
    if (x->i >= c->ds->n || x->why) {
        if (c->g->lockstep) os_generate(c->s, NULL, c->g, &r);
        if (x->why) failed(c, x, x->why);
        return;
    }
    double t0 = os_now();
    int rc = os_generate(c->s, &x->p, c->g, &r);
    if (rc == 0) rc = decoded(c, x, &r, os_now() - t0);
    if (rc < 0) failed(c, x, os_errmsg());
    os_gen_result_free(&r);
}

// the batched engine's prompt j: slot good[j]'s (moved into p: the engine frees it)
static int batch_prompt(void *ctx, int64_t j, os_infer_prompt *p) {
    run *c = ctx;
    slot *x = &c->sl[c->good[j]];
    *p = x->p;
    memset(&x->p, 0, sizeof x->p);
    return 0;
}

static int batch_done(void *ctx, int64_t j, const os_infer_prompt *p, const os_gen_result *r, double sec) {
    run *c = ctx;
    slot *x = &c->sl[c->good[j]];
    x->p = *p;   // for the line only (the engine frees the prompt)
    int rc = decoded(c, x, r, sec);
    memset(&x->p, 0, sizeof x->p);
    return rc;
}

// This rank's slots decoded: one at a time, or (--infer_batch_size B > 1) B at once by os_generate_batch. 0, or -1
// + message (stops every rank)
static int decode_round(run *c, int64_t nw) {
    if (c->a->batch <= 1) {
        for (int64_t j = 0; j < nw; j++) decode_one(c, &c->sl[j]);
        return 0;
    }
    int64_t n = 0;
    for (int64_t j = 0; j < nw; j++)
        if (c->sl[j].i < c->ds->n && !c->sl[j].why) c->good[n++] = j;
        else if (c->sl[j].why) failed(c, &c->sl[j], c->sl[j].why);
    return os_generate_batch(c->s, c->a->batch, n, c->g, batch_prompt, batch_done, c);
}

// The round's lines (rank 0 gathers those of the other streams) written in dataset order: record base + j*S + k is
// stream k's slot j. A failed record: its error line (--on_error skip), or (stop) the lines before it written and
// every rank stops. 0, or 1 after the message.
static int write_round(const run *c, int64_t base, int64_t nw, tally *t, double t0) {
    int S = c->S, me = comm_rank(), code;
    const infer_args *a = c->a;
    os_dataset *ds = c->ds;
    int64_t W = c->W, total = 0, most = 0, stop_at = -1, upto = base;
    rec_stats *all = os_alloc(sizeof(rec_stats) * (size_t)(S * W), "record stats"), *mine = all + c->mine * W;
    for (int64_t j = 0; j < nw; j++) mine[j] = c->sl[j].st, total += c->sl[j].st.len;
    int64_t *totals = os_alloc(sizeof(int64_t) * (size_t)S, "round bytes");
    totals[c->mine] = total;
    if (S > 1) {
        rec_stats *st = os_alloc(sizeof(rec_stats) * (size_t)W, "record stats");
        memcpy(st, mine, sizeof(rec_stats) * (size_t)W);
        comm_allgather_bytes(st, all, sizeof(rec_stats) * (size_t)W);
        comm_allgather_bytes(&total, totals, sizeof total);
        os_free(st);
    }
    for (int k = 0; k < S; k++) most = totals[k] > most ? totals[k] : most;
    char *my = os_alloc((size_t)most + 1, "output lines"), *bytes = os_alloc((size_t)(most * S) + 1, "output lines");
    for (int64_t j = 0, at = 0; j < nw; at += c->sl[j].st.len, j++) memcpy(my + at, c->sl[j].line, (size_t)c->sl[j].st.len);
    if (S > 1 && most) comm_allgather_bytes(my, bytes, most);
    else memcpy(bytes, my, (size_t)most);
    int rc = 0;
    for (int64_t j = 0; j < nw && rc == 0 && stop_at < 0; j++)
        for (int k = 0; k < S && rc == 0 && base + j * S + k < ds->n; k++, upto++) {
            const rec_stats *r = &all[k * W + j];
            if (r->failed && (!r->len || !skipping(a))) {
                stop_at = base + j * S + k;
                break;
            }
            int64_t at = 0;
            for (int64_t q = 0; q < j; q++) at += all[k * W + q].len;
            count(t, r);
            if (me == 0) rc = os_infer_output_write(c->out, bytes + k * most + at, (size_t)r->len, base + j * S + k);
        }
    os_free(my), os_free(bytes), os_free(all), os_free(totals);
    code = os_infer_failed(rc);
    if (!code && stop_at >= 0) {
        code = 1;
        if (me == 0)
            fprintf(stderr, "omnishard infer: stopped at record %lld, %s:%lld (--on_error stop): the %lld records "
                    "before it are in %s; fix it and run again with --resume true (or --on_error skip: an error "
                    "line for it)\n", (long long)stop_at, ds->path, (long long)os_infer_record_line_no(ds, stop_at),
                    (long long)stop_at, a->output_file);
    }
    if (!code && me == 0) progress(t, upto, ds->n, t0, upto == ds->n);
    return code;
}

// A signal on any rank (collective): every rank stops here, the first `in` records in the file; the exit status, or 0
static int signalled(const run *c, int64_t in) {
    if (!comm_any_failed(os_stop_signal != 0)) return 0;
    if (comm_rank() == 0)
        fprintf(stderr, "omnishard infer: stopped by a signal: the first %lld of %lld records are in %s; run again with "
                "--resume true to decode the rest\n", (long long)in, (long long)c->ds->n, c->a->output_file);
    return 128 + (os_stop_signal ? os_stop_signal : SIGTERM);
}

// The records in rounds of W per stream: split over the ranks (S = N: alone at ZeRO 0-2, g->local; in lockstep at
// ZeRO-3, every rank running each forward), else (1 rank) S = 1. Each round: this rank's prompts, their spoken
// questions K at a time through the encoder and the projector, the records decoded (one at a time, or B at once),
// the lines written. 0, or 1 after the message.
static int rounds(run *c, int64_t done, tally *t, double t0) {
    int code = 0;
    int64_t n = c->ds->n, S = c->S;
    if (comm_rank() == 0 && S > 1)
        os_info("omnishard infer: the records split over %lld ranks, each decoding its own %s", (long long)S,
                c->g->lockstep ? "(ZeRO-3: every rank in every forward's gathers)" : "alone");
    c->sl = os_alloc(sizeof(slot) * (size_t)c->W, "round records");
    c->good = os_alloc(sizeof(int64_t) * (size_t)c->W, "round records decoded");
    code = signalled(c, done);   // a signal while the model loaded: nothing decoded
    for (int64_t base = done; !code && base < n; base += S * c->W) {
        int64_t left = (n - base + S - 1) / S, nw = left < c->W ? left : c->W;
        char phase[200], note[4400];   // what a collective's timeout report names
        snprintf(phase, sizeof phase, "while decoding records %lld-%lld of %lld (omnishard infer: the first %lld are in "
                 "the output file; --resume true continues)", (long long)base,
                 (long long)(base + S * nw < n ? base + S * nw : n) - 1, (long long)n, (long long)base);
        snprintf(note, sizeof note, "The first %lld records are in %s: run again with --resume true to decode the "
                 "rest.", (long long)base, c->a->output_file);
        comm_set_phase(phase), comm_set_stop_note(note);
        for (int64_t j = 0; j < nw; j++) c->sl[j] = (slot){.i = base + j * S + c->mine};
        prepare(c, nw);
        code = os_infer_failed(decode_round(c, nw));
        if (!code) code = write_round(c, base, nw, t, t0);
        if (!code) code = signalled(c, base + S * nw < n ? base + S * nw : n);
        for (int64_t j = 0; j < nw; j++) os_infer_prompt_free(&c->sl[j].p), os_free(c->sl[j].why), free(c->sl[j].line);
    }
    os_free(c->sl), os_free(c->good);
    comm_set_phase("at the end of omnishard infer");
    return code;
}

int os_infer_dataset(os_session *s, const os_tokenizer *tok, const infer_args *a, const os_gen_opts *g,
                     os_infer_out *out) {
    os_dataset *ds = os_infer_dataset_open(&s->model, a->model, a->dataset, os_speech_positions(&s->model), 1);
    if (os_infer_failed(ds ? 0 : -1)) return ds ? ds->free(ds), 1 : 1;
    int64_t done = 0, n = ds->n;
    int rc = 0;
    if (comm_rank() == 0) {
        if (ds->bad)
            os_info("omnishard infer: note: %lld of %lld records of %s failed the checks at open (each is named when it "
                    "is reached; --on_error %s)", (long long)ds->bad, (long long)n, a->dataset, skipping(a) ? "skip" : "stop");
        rc = os_infer_output_start(out, ds);
        done = out->done;
        if (rc == 0 && done) os_info("omnishard infer: --resume: %lld of %lld records already in %s", (long long)done,
                                     (long long)n, a->output_file);
    }
    int code = os_infer_failed(rc);
    comm_bcast(&done, sizeof done, 0);
    tally t = {0};
    double t0 = os_now();
    int split = g->local || g->lockstep;
    int64_t K = a->speech_batch_size ? a->speech_batch_size : 8;   // the option's default
    run c = {.s = s, .ds = ds, .tok = tok, .a = a, .g = g, .out = out, .S = split ? comm_size() : 1, .mine = split ? comm_rank() : 0,
             .W = a->batch > 1 ? 4 * a->batch : K, .K = K};
    if (!code) code = rounds(&c, done, &t, t0);
    if (!code && comm_rank() == 0) {
        int64_t ok = t.records - t.errors;
        double k = ok ? (double)ok : 1.0;
        char errs[96] = "";
        if (t.errors) snprintf(errs, sizeof errs, "; errors %lld (error lines, --on_error skip)", (long long)t.errors);
        os_info("omnishard infer: done: %lld records decoded into %s (%lld there before), mean %.1f steps, %.1f text "
                "tokens, %.1f audio positions; stop: eot %lld, eoa %lld, max_new_tokens %lld%s", (long long)t.records,
                a->output_file, (long long)done, (double)t.steps / k, (double)t.text / k, (double)t.audio / k,
                (long long)t.stops[0], (long long)t.stops[1], (long long)t.stops[2], errs);
    }
    ds->free(ds);
    return code;
}
