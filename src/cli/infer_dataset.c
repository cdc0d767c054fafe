// omnishard infer --dataset FILE --output_file OUT (infer_run.h): every record of a test set decoded, one JSON line
// each, in dataset order (docs/inference.md "A whole test set").
#include "cli/infer_dataset.h"
#include "cli/infer_json.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/timer.h"
#include "zero/comm.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const TASK_NAMES[] = {"s2s", "asr", "tts"};

typedef struct {
    int64_t records, steps, text, audio, stops[3];   // stops: eot, eoa, max_new_tokens
} tally;

static const char *const STOPS[] = {"eot", "eoa", "max_new_tokens"};

// why generation stopped: the stream that ended last (eot at step ntext, eoa at step naudio - 1; text first on a
// tie), or max_new_tokens when a stream had not ended
static int stop_reason(const os_gen_result *r, int text_only) {
    if (!r->text_end || (!text_only && !r->audio_end)) return 2;
    return text_only || r->ntext >= r->naudio - 1 ? 0 : 1;
}

// Resume (rank 0): the complete lines of out, each the record its position says ("index" 0, 1, ..), are kept; a
// partial last line (a killed run) is cut off. *done: the lines kept. 0, or -1 + message naming out:LINE.
static int resume_scan(const char *out, int64_t n, int64_t *done) {
    *done = 0;
    FILE *f = fopen(out, "rb");
    if (!f) return errno == ENOENT ? 0 : os_errf("--output_file %s: cannot read it to resume: %m", out);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long kept = 0;
    int rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) > 0 && line[len - 1] == '\n') {
        cJSON *o = cJSON_ParseWithLength(line, (size_t)len);
        const cJSON *ix = o ? cJSON_GetObjectItemCaseSensitive(o, "index") : NULL;
        if (!cJSON_IsNumber(ix) || ix->valuedouble != (double)*done || *done >= n)
            rc = os_errf("--output_file %s:%lld: not line %lld of this run (its \"index\" must be %lld, of %lld records): "
                         "give another --output_file, or --resume false to start it again", out, (long long)*done + 1,
                         (long long)*done + 1, (long long)*done, (long long)n);
        cJSON_Delete(o);
        if (rc == 0) (*done)++, kept += (long)len;
    }
    free(line);
    fclose(f);
    if (rc == 0 && truncate(out, kept) < 0) rc = os_errf("--output_file %s: cannot cut off its partial last line: %m", out);
    return rc;
}

// the whole line at once; -1 + message
static int write_line(int fd, const char *out, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, buf, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return os_errf("--output_file %s: write failed: %m", out);
        buf += k, n -= (size_t)k;
    }
    return 0;
}

// the record's field name (or null) as JSON text
static void put_field(FILE *f, const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    char *t = v ? cJSON_PrintUnformatted(v) : NULL;
    fprintf(f, "\"%s\": %s, ", name, t ? t : "null");
    cJSON_free(t);
}

// the output line of record i: key, source_text, target_text (the record's, as the reference's question/gt files),
// index, line, task, stop, counts, seconds, then the fields of a single answer
static char *format_line(os_dataset *ds, int64_t i, const os_tokenizer *tok, const os_model *m, const os_infer_prompt *p,
                         const os_gen_result *r, int text_only, int show_prompt, double sec, size_t *n) {
    const char *text = "{}";
    size_t len = 2;
    int64_t line = 0;
    if (ds->record) ds->record(ds, i, &text, &len, &line);
    cJSON *o = cJSON_ParseWithLength(text, len);
    char *buf = NULL;
    FILE *f = open_memstream(&buf, n);
    if (!o || !f) {
        if (f) fclose(f), free(buf);
        cJSON_Delete(o);
        return os_errf("%s:%lld: the record cannot be read again (the file changed since it was opened?)", ds->path,
                       (long long)line), NULL;
    }
    fputc('{', f);
    put_field(f, o, "key");
    put_field(f, o, "source_text");
    put_field(f, o, "target_text");
    cJSON_Delete(o);
    fprintf(f, "\"index\": %lld, \"line\": %lld, \"task\": \"%s\", \"stop\": \"%s\", \"text_tokens\": %lld, "
            "\"audio_positions\": %lld, \"seconds\": %.6f, ", (long long)i, (long long)line, TASK_NAMES[p->task],
            STOPS[stop_reason(r, text_only)], (long long)r->ntext, (long long)r->naudio, sec);
    os_infer_print_opts po = {show_prompt, 0, ""};
    os_infer_write(f, tok, m, p, r, text_only, &po);
    fputs("}\n", f);
    fclose(f);
    return buf;
}

static void progress(const tally *t, int64_t done, int64_t n, double t0, int last) {
    static double shown;
    double now = os_now(), sec = now - t0;
    if (!last && now - shown < 1.0) return;
    shown = now;
    double rps = sec > 0 ? (double)t->records / sec : 0.0;
    os_info("omnishard infer: %lld/%lld records, %.2f records/s, %.1f tokens/s, ETA %.0f s", (long long)done,
            (long long)n, rps, sec > 0 ? (double)t->steps / sec : 0.0, rps > 0 ? (double)(n - done) / rps : 0.0);
}

// what a record adds to the summary (exchanged between ranks when they split the records)
typedef struct {
    int64_t steps, text, audio, stop;
} rec_stats;

static void count(tally *t, const rec_stats *r) {
    t->records++, t->steps += r->steps, t->text += r->text, t->audio += r->audio, t->stops[r->stop]++;
}

// Record i: prompt, generation and (where line is given) its output line (malloc'd) on this rank. split: this rank
// alone (0, or -1 + message, not yet reported); else collectively, every rank alike (0, or 1 after the message).
static int decode(os_session *s, os_dataset *ds, int64_t i, const os_tokenizer *tok, const infer_args *a,
                  const os_gen_opts *g, int split, char **line, size_t *len, rec_stats *st) {
    os_infer_prompt p;
    os_gen_result r;
    int rc = os_infer_prompt_record(&p, ds, i);
    if (!split && os_infer_failed(rc)) rc = 1;
    double t0 = os_now();
    if (rc == 0) rc = os_generate(s, &p, g, &r);
    if (!split && rc == -1) rc = os_infer_failed(rc);
    if (rc == 0) {
        int text_only = g->text_only || p.asr;
        *st = (rec_stats){r.steps, r.ntext, r.naudio, stop_reason(&r, text_only)};
        if (line && !(*line = format_line(ds, i, tok, &s->model, &p, &r, text_only, a->show_prompt, os_now() - t0, len)))
            rc = -1;
        os_gen_result_free(&r);
    }
    os_infer_prompt_free(&p);
    return rc;
}

// Records decoded by os_generate_batch (--infer_batch_size > 1): its prompt j is record first + j * stride. The
// finished records' lines and stats by j; with t (a collective run) every rank counts them, and rank 0 writes them,
// in dataset order as soon as every earlier one is done.
typedef struct {
    os_session *s;
    os_dataset *ds;
    const os_tokenizer *tok;
    const infer_args *a;
    const os_gen_opts *g;
    int64_t first, stride, n;
    int format;          // this rank formats the lines
    char **lines;        // [n] (malloc'd)
    size_t *lens;        // [n]
    rec_stats *st;       // [n]
    uint8_t *ready;      // [n]
    int fd;              // the output file (rank 0 of a collective run), else -1
    tally *t;            // NULL: the caller gathers and writes (records split over ranks)
    int64_t written;     // prompts counted (and written) so far, in order
    double t0;
} batch_run;

static void batch_run_init(batch_run *b, int64_t n) {
    b->n = n, b->written = 0;
    b->lines = os_alloc(sizeof(char *) * (size_t)(n + 1), "output lines");
    b->lens = os_alloc(sizeof(size_t) * (size_t)(n + 1), "output line lengths");
    b->st = os_alloc(sizeof(rec_stats) * (size_t)(n + 1), "record stats");
    b->ready = os_alloc((size_t)(n + 1), "records done");
}

static void batch_run_free(batch_run *b) {
    for (int64_t j = 0; j < b->n; j++) free(b->lines[j]);
    os_free(b->lines), os_free(b->lens), os_free(b->st), os_free(b->ready);
}

static int batch_prompt(void *ctx, int64_t j, os_infer_prompt *p) {
    batch_run *b = ctx;
    return os_infer_prompt_record(p, b->ds, b->first + j * b->stride);
}

static int batch_done(void *ctx, int64_t j, const os_infer_prompt *p, const os_gen_result *r, double sec) {
    batch_run *b = ctx;
    int text_only = b->g->text_only || p->asr, rc = 0;
    b->st[j] = (rec_stats){r->steps, r->ntext, r->naudio, stop_reason(r, text_only)};
    b->ready[j] = 1;
    if (b->format && !(b->lines[j] = format_line(b->ds, b->first + j * b->stride, b->tok, &b->s->model, p, r, text_only,
                                                 b->a->show_prompt, sec, &b->lens[j])))
        return -1;
    for (; b->t && rc == 0 && b->written < b->n && b->ready[b->written]; b->written++) {
        int64_t w = b->written;
        count(b->t, &b->st[w]);
        if (b->fd >= 0) rc = write_line(b->fd, b->a->output_file, b->lines[w], b->lens[w]);
        free(b->lines[w]), b->lines[w] = NULL;
        if (b->fd >= 0) progress(b->t, b->first + w + 1, b->ds->n, b->t0, b->first + w + 1 == b->ds->n);
    }
    return rc;
}

// --infer_batch_size B > 1 without the records split: every rank decodes them together, B at once. 0, or 1 after
// the message.
static int collective_batched(os_session *s, os_dataset *ds, int64_t done, const os_tokenizer *tok, const infer_args *a,
                              const os_gen_opts *g, int fd, tally *t, double t0) {
    batch_run b = {.s = s, .ds = ds, .tok = tok, .a = a, .g = g, .first = done, .stride = 1,
                   .format = comm_rank() == 0, .fd = comm_rank() == 0 ? fd : -1, .t = t, .t0 = t0};
    batch_run_init(&b, ds->n - done);
    int rc = os_generate_batch(s, a->batch, b.n, g, batch_prompt, batch_done, &b);
    batch_run_free(&b);
    return os_infer_failed(rc);
}

// every rank decodes the records one at a time together (any ZeRO stage); rank 0 writes. 0, or 1 after the message.
static int collective(os_session *s, os_dataset *ds, int64_t done, const os_tokenizer *tok, const infer_args *a,
                      const os_gen_opts *g, int fd, tally *t, double t0) {
    int code = 0;
    for (int64_t i = done; !code && i < ds->n; i++) {
        char *line = NULL;
        size_t len = 0;
        rec_stats st;
        int rc = decode(s, ds, i, tok, a, g, 0, comm_rank() == 0 ? &line : NULL, &len, &st);
        if (rc == 0 && line) rc = write_line(fd, a->output_file, line, len);
        free(line);
        code = rc > 0 ? 1 : os_infer_failed(rc);
        if (!code) count(t, &st);
        if (!code && comm_rank() == 0) progress(t, i + 1, ds->n, t0, i + 1 == ds->n);
    }
    return code;
}

// this rank's records of a round, b->first + j * N (j < b->n): one at a time (B = 1), or B at once. 0, or -1 +
// message (not yet reported)
static int decode_mine(batch_run *b) {
    if (b->a->batch > 1) return os_generate_batch(b->s, b->a->batch, b->n, b->g, batch_prompt, batch_done, b);
    int rc = b->n ? decode(b->s, b->ds, b->first, b->tok, b->a, b->g, 1, &b->lines[0], &b->lens[0], &b->st[0]) : 0;
    return rc < 0 ? -1 : 0;
}

// ZeRO 0-2 (every rank holds the whole model): in rounds of W records per rank (1; 4 B with --infer_batch_size B >
// 1), rank k decodes records base + j*N + k (j < W) alone; after each round rank 0 gathers the lines and writes them
// in dataset order. 0, or 1 after the message.
static int split(os_session *s, os_dataset *ds, int64_t done, const os_tokenizer *tok, const infer_args *a,
                 const os_gen_opts *g, int fd, tally *t, double t0) {
    int N = comm_size(), me = comm_rank(), code = 0;
    int64_t W = a->batch > 1 ? 4 * a->batch : 1;
    int64_t *lens = os_alloc(sizeof(int64_t) * (size_t)(N * W), "line lengths"), *mylens = os_alloc(sizeof(int64_t) * (size_t)W, "line lengths");
    int64_t *totals = os_alloc(sizeof(int64_t) * (size_t)N, "round bytes");
    rec_stats *all = os_alloc(sizeof(rec_stats) * (size_t)(N * W), "record stats");
    if (me == 0) os_info("omnishard infer: the records split over %d ranks, each decoding its own alone", N);
    for (int64_t base = done; !code && base < ds->n; base += N * W) {
        batch_run b = {.s = s, .ds = ds, .tok = tok, .a = a, .g = g, .first = base + me, .stride = N, .format = 1, .fd = -1};
        int64_t mine = b.first < ds->n ? (ds->n - 1 - b.first) / N + 1 : 0, total = 0, most = 0;
        batch_run_init(&b, mine < W ? mine : W);
        int rc = decode_mine(&b);
        if ((code = os_infer_failed(rc))) {
            batch_run_free(&b);
            break;
        }
        for (int64_t j = 0; j < W; j++) mylens[j] = j < b.n ? (int64_t)b.lens[j] : 0, total += mylens[j];
        comm_allgather_bytes(mylens, lens, sizeof(int64_t) * (size_t)W);
        comm_allgather_bytes(&total, totals, sizeof total);
        rec_stats *st = os_alloc(sizeof(rec_stats) * (size_t)W, "record stats");
        memcpy(st, b.st, sizeof(rec_stats) * (size_t)b.n);
        comm_allgather_bytes(st, all, sizeof(rec_stats) * (size_t)W);
        os_free(st);
        for (int k = 0; k < N; k++) most = totals[k] > most ? totals[k] : most;
        char *mybytes = os_alloc((size_t)most + 1, "output lines"), *bytes = os_alloc((size_t)(most * N) + 1, "output lines");
        for (int64_t j = 0, at = 0; j < b.n; at += mylens[j], j++) memcpy(mybytes + at, b.lines[j], (size_t)mylens[j]);
        batch_run_free(&b);
        if (most) comm_allgather_bytes(mybytes, bytes, most);
        int64_t upto = base;
        for (int64_t j = 0; j < W && rc == 0; j++)   // record base + j*N + k: rank k's line j
            for (int k = 0; k < N && rc == 0 && base + j * N + k < ds->n; k++, upto++) {
                int64_t at = 0;
                for (int64_t q = 0; q < j; q++) at += lens[k * W + q];
                count(t, &all[k * W + j]);
                if (me == 0) rc = write_line(fd, a->output_file, bytes + k * most + at, (size_t)lens[k * W + j]);
            }
        os_free(mybytes), os_free(bytes);
        code = os_infer_failed(rc);
        if (!code && me == 0) progress(t, upto, ds->n, t0, upto == ds->n);
    }
    os_free(lens), os_free(mylens), os_free(totals), os_free(all);
    return code;
}

int os_infer_dataset(os_session *s, const os_tokenizer *tok, const infer_args *a, const os_gen_opts *g) {
    os_dataset *ds = os_infer_dataset_open(&s->model, a->model, a->dataset, os_speech_positions(&s->model));
    if (os_infer_failed(ds ? 0 : -1)) return ds ? ds->free(ds), 1 : 1;
    int64_t done = 0, n = ds->n;
    int fd = -1, rc = 0;
    if (comm_rank() == 0) {
        rc = a->resume ? resume_scan(a->output_file, n, &done) : 0;
        if (rc == 0) fd = open(a->output_file, O_WRONLY | O_CREAT | O_APPEND | (a->resume ? 0 : O_TRUNC), 0644);
        if (rc == 0 && fd < 0) rc = os_errf("--output_file %s: cannot write it: %m", a->output_file);
        if (rc == 0 && done) os_info("omnishard infer: --resume: %lld of %lld records already in %s", (long long)done,
                                     (long long)n, a->output_file);
    }
    int code = os_infer_failed(rc);
    comm_bcast(&done, sizeof done, 0);
    tally t = {0};
    double t0 = os_now();
    if (!code && g->local) code = split(s, ds, done, tok, a, g, fd, &t, t0);
    else if (!code) code = (a->batch > 1 ? collective_batched : collective)(s, ds, done, tok, a, g, fd, &t, t0);
    if (fd >= 0 && close(fd) < 0 && !code) code = 1, fprintf(stderr, "omnishard infer: --output_file %s: %m\n", a->output_file);
    if (!code && comm_rank() == 0) {
        double k = t.records ? (double)t.records : 1.0;
        os_info("omnishard infer: done: %lld records decoded into %s (%lld there before), mean %.1f steps, %.1f text "
                "tokens, %.1f audio positions; stop: eot %lld, eoa %lld, max_new_tokens %lld", (long long)t.records,
                a->output_file, (long long)done, (double)t.steps / k, (double)t.text / k, (double)t.audio / k,
                (long long)t.stops[0], (long long)t.stops[1], (long long)t.stops[2]);
    }
    ds->free(ds);
    return code;
}
