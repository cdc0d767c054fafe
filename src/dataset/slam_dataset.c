// The SLAM-Omni dataset (slam_dataset.h): the file is mapped, every record checked at open; a sample's text is
// tokenized on its first get (ids cached per record), its rows are rebuilt on every get into a ring of buffers.
#include "dataset/slam_dataset.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "audio/audio.h"
#include "dataset/jsonrec.h"
#include "dataset/slam_record.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include <errno.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RING 256    // samples returned by get stay valid for the next RING-1 gets (os_dataset.live)
#define WARN_MAX 10 // skip messages printed per rank (all are counted)

typedef struct {
    int64_t off, len, line;
    char *wav;            // readable path of the spoken question, or NULL
    int32_t *ids;         // after the first get: prompt | question | answer text ids
    int64_t np, nq, na;
    int64_t keep;         // answer positions kept; -1: skipped (no room for the answer)
    int64_t need;         // os_sample.need: 0 whole, else the max_length that keeps it (cut) or trains it (skipped)
    int built;
    char *err;            // keep_bad: why the record failed its checks at open (its get fails with it), or NULL
} slam_item;

typedef struct {
    int32_t *ids, *labels;
    uint8_t *speech;
    int64_t cap;          // positions * rows the buffers hold
} slot;

typedef struct {
    os_dataset base;
    os_slam_config c;
    char *map;            // the file mapped while it is opened (scanned, checked, digested); NULL after
    size_t mapn;
    int fd;               // the file, read with pread per record during the run: a file truncated or rewritten under
    struct stat st;       // the run is an error naming it (a mapped file would end every rank with SIGBUS)
    char *rec;            // scratch: the record read last
    size_t rec_cap;
    os_tokenizer *tok;
    slam_item *item;
    uint8_t *skip;        // [n] 1 = found unusable on its first get (on this rank)
    slot ring[RING];
    int ringpos;
    int32_t *audio;       // scratch: the answer tokens of the current get
    int64_t audio_cap, warned;
} slam_ds;

static void warn_skip(slam_ds *d, const slam_item *it, const char *fmt, int64_t a, int64_t b) {
    if (d->warned++ >= WARN_MAX) return;
    char msg[512];
    snprintf(msg, sizeof msg, fmt, (long long)a, (long long)b);
    if (os_rank >= 0) fprintf(stderr, "omnishard: rank %d: ", os_rank);
    else fprintf(stderr, "omnishard: ");
    fprintf(stderr, "%s:%lld: sample skipped (counted, reported at the end): %s\n", d->base.path, (long long)it->line, msg);
}

static int encode(slam_ds *d, const slam_item *it, const char *field, const char *s, size_t n, int32_t **ids, int64_t *nids) {
    if (os_tok_encode(d->tok, s, n, ids, nids) < 0)
        return os_err_ctx("%s:%lld: field '%s'", d->base.path, (long long)it->line, field);
    return 0;
}

// record it's text into d->rec (or in the map while the file is opened); NULL + message when the file is no longer
// what was opened (its size or modification time changed: truncated, rewritten) or cannot be read
static const char *record_text(slam_ds *d, const slam_item *it) {
    if (d->map) return d->map + it->off;
    struct stat now;
    if (fstat(d->fd, &now) != 0) {
        os_errf("%s: cannot read the dataset: %s", d->base.path, strerror(errno));
        return NULL;
    }
    if (now.st_size != d->st.st_size || now.st_mtim.tv_sec != d->st.st_mtim.tv_sec || now.st_mtim.tv_nsec != d->st.st_mtim.tv_nsec) {
        os_errf("%s: the dataset file was %s while the run reads it (%lld bytes when opened, %lld now; line %lld "
                       "was to be read): a run reads its data files until it ends; restore the file, or resume from the "
                       "last checkpoint with the new file (--resume_override_config true)", d->base.path,
                       now.st_size < d->st.st_size ? "truncated" : "rewritten", (long long)d->st.st_size,
                       (long long)now.st_size, (long long)it->line);
        return NULL;
    }
    if ((size_t)it->len + 1 > d->rec_cap) {
        os_free(d->rec);
        d->rec = os_alloc_uninit(d->rec_cap = (size_t)it->len * 2 + 1, "dataset record");
    }
    for (size_t got = 0; got < (size_t)it->len;) {
        ssize_t n = pread(d->fd, d->rec + got, (size_t)it->len - got, (off_t)it->off + (off_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            os_errf("%s:%lld: cannot read the record: %s", d->base.path, (long long)it->line,
                    n < 0 ? strerror(errno) : "the file ends early (truncated while the run reads it)");
            return NULL;
        }
        got += (size_t)n;
    }
    d->rec[it->len] = 0;
    return d->rec;
}

static int parse(slam_ds *d, const slam_item *it, cJSON **o, os_slam_record *r) {
    const char *text = record_text(d, it);
    if (!text) return -1;
    *o = cJSON_ParseWithLength(text, (size_t)it->len);
    if (!*o) return os_errf("%s:%lld: malformed JSON (the file changed since it was opened?)", d->base.path, (long long)it->line);
    if (os_slam_record_read(*o, d->base.path, it->line, d->c.A, d->c.prompt_only, r) < 0) {
        cJSON_Delete(*o);
        return -1;
    }
    if (r->default_system && d->c.system) r->system_prompt = d->c.system;   // --system
    return 0;
}

// first get: tokenize, apply the max_length policy (docs/dataset.md), cache the ids
static int build_item(slam_ds *d, slam_item *it, const os_slam_record *r) {
    int32_t *pr = NULL, *q = NULL, *an = NULL;
    int64_t np = 0, nq = 0, na = 0;
    size_t len;
    char *text = os_slam_prompt_text(r, &len);
    int rc = encode(d, it, "system_prompt/history/source_text", text, len, &pr, &np);
    os_free(text);
    const char *qtext = r->task == OS_TASK_TTS ? r->answer : (!r->wav ? r->question : NULL);
    size_t qlen = r->task == OS_TASK_TTS ? (size_t)r->answer_len : qtext ? strlen(qtext) : 0;
    if (rc == 0 && qtext) rc = encode(d, it, r->task == OS_TASK_TTS ? "target_text" : "source_text", qtext, qlen, &q, &nq);
    if (rc == 0) rc = encode(d, it, r->task == OS_TASK_ASR ? "source_text" : "target_text", r->answer, (size_t)r->answer_len, &an, &na);
    if (rc < 0) {
        os_free(pr), os_free(q), os_free(an);
        return -1;
    }
    os_slam_parts p = {.task = r->task, .speech = r->wav != NULL, .prompt = pr, .np = np, .question = q, .nq = nq,
                       .answer = an, .na = na, .naudio = r->ntokens, .has_audio = r->tokens != NULL};
    int64_t P, S, La, max = d->c.max_length;
    os_slam_lengths(&d->c, &p, &P, &S, &La);
    it->keep = La, it->need = P + S + La > max ? P + S + La : 0;
    if (P + S + La > max && !strcmp(d->c.truncation, "delete")) {
        it->keep = -1;
        warn_skip(d, it, "%lld positions > --max_length %lld (--truncation_strategy delete)", P + S + La, max);
    } else if (P + S + La > max) {
        // keep the system prompt and the question, drop history tokens from the left, then cut the answer's end
        int32_t *sys = NULL, *hist = NULL;
        int64_t ns = 0, nh = 0;
        char *st = os_slam_system_text(r, &len);
        rc = encode(d, it, "system_prompt", st, len, &sys, &ns);
        os_free(st);
        char *ht = os_slam_history_text(r, &len);
        if (rc == 0) rc = encode(d, it, "history/source_text", ht, len, &hist, &nh);
        os_free(ht);
        if (rc < 0) {
            os_free(pr), os_free(q), os_free(an), os_free(sys), os_free(hist);
            return -1;
        }
        int64_t room = max - (2 + ns + S);   // positions left for history + answer
        int64_t kh = room - La < 0 ? 0 : room - La < nh ? room - La : nh;
        os_free(pr);
        pr = os_alloc(sizeof(int32_t) * (size_t)(ns + kh + 1), "prompt ids");
        if (ns) memcpy(pr, sys, sizeof(int32_t) * (size_t)ns);
        if (kh) memcpy(pr + ns, hist + nh - kh, sizeof(int32_t) * (size_t)kh);
        np = ns + kh;
        os_free(sys), os_free(hist);
        if (room < 1) {
            it->keep = -1, it->need = 2 + ns + S + 1;   // the system prompt, the question and one answer position
            warn_skip(d, it, "no room for the answer: the prompt and the question alone need %lld of --max_length %lld positions",
                      2 + ns + S, max);
        } else if (room < La) {
            it->keep = room;
        }
    }
    it->np = np, it->nq = nq, it->na = na;
    it->ids = os_alloc(sizeof(int32_t) * (size_t)(np + nq + na + 1), "sample text ids");
    if (np) memcpy(it->ids, pr, sizeof(int32_t) * (size_t)np);
    if (nq) memcpy(it->ids + np, q, sizeof(int32_t) * (size_t)nq);
    if (na) memcpy(it->ids + np + nq, an, sizeof(int32_t) * (size_t)na);
    os_free(pr), os_free(q), os_free(an);
    it->built = 1;
    return 0;
}

static slot *next_slot(slam_ds *d, int64_t cells) {
    slot *s = &d->ring[d->ringpos];
    d->ringpos = (d->ringpos + 1) % RING;
    if (s->cap < cells) {
        os_free(s->ids), os_free(s->labels), os_free(s->speech);
        s->cap = cells + cells / 4;
        s->ids = os_alloc(sizeof(int32_t) * (size_t)s->cap, "sample ids");
        s->labels = os_alloc(sizeof(int32_t) * (size_t)s->cap, "sample labels");
        s->speech = os_alloc((size_t)s->cap, "sample speech mask");
    }
    return s;
}

static int slam_get(os_dataset *base, int64_t i, os_sample *out) {
    slam_ds *d = (slam_ds *)base;
    slam_item *it = &d->item[i];
    int64_t G = d->c.G, R = G + 1;
    memset(out, 0, sizeof *out);
    if (it->err) return os_errf("%s", it->err);
    cJSON *o;
    os_slam_record r;
    if (parse(d, it, &o, &r) < 0) return -1;
    if (!it->built && build_item(d, it, &r) < 0) {
        cJSON_Delete(o);
        return -1;
    }
    if (it->keep < 0) {   // skipped: one position, no targets
        d->skip[i] = 1;
        cJSON_Delete(o);
        out->need = it->need;
        slot *s = next_slot(d, R);
        for (int64_t g = 0; g < G; g++) s->ids[g] = os_slam_audio_id(&d->c, g, os_pad_a(d->c.A));
        s->ids[G] = os_pad_t(d->c.T);
        for (int64_t k = 0; k < R; k++) s->labels[k] = -100;
        out->R = R, out->L = 1, out->ids = s->ids, out->labels = s->labels, out->wav_index = -1;
        return 0;
    }
    if (r.ntokens > d->audio_cap) {
        os_free(d->audio);
        d->audio_cap = r.ntokens * 2;
        d->audio = os_alloc(sizeof(int32_t) * (size_t)d->audio_cap, "answer audio tokens");
    }
    int64_t k = 0;
    for (const cJSON *x = r.tokens ? r.tokens->child : NULL; x; x = x->next) d->audio[k++] = (int32_t)x->valuedouble;
    os_slam_parts p = {.task = r.task, .speech = r.wav != NULL, .prompt = it->ids, .np = it->np, .question = it->ids + it->np,
                       .nq = it->nq, .answer = it->ids + it->np + it->nq, .na = it->na, .audio = d->audio, .naudio = k,
                       .has_audio = r.tokens != NULL};
    cJSON_Delete(o);
    int64_t P, S, La;
    os_slam_lengths(&d->c, &p, &P, &S, &La);
    slot *s = next_slot(d, R * (P + S + it->keep));
    out->ids = s->ids, out->labels = s->labels, out->speech = p.speech ? s->speech : NULL;
    os_sample tmp = {.ids = s->ids, .labels = s->labels, .speech = s->speech};
    os_slam_build(&d->c, &p, it->keep, &tmp);
    out->R = tmp.R, out->L = tmp.L, out->lead = tmp.lead;
    out->wav_index = p.speech ? i : -1;
    out->task = r.task, out->need = it->need;
    return 0;
}

static const char *slam_wav(os_dataset *base, int64_t wav_index) {
    slam_ds *d = (slam_ds *)base;
    return wav_index >= 0 && wav_index < base->n ? d->item[wav_index].wav : NULL;
}

static void slam_record(os_dataset *base, int64_t i, const char **text, size_t *len, int64_t *line) {
    slam_ds *d = (slam_ds *)base;
    const char *t = record_text(d, &d->item[i]);
    *text = t ? t : "", *len = t ? (size_t)d->item[i].len : 0, *line = d->item[i].line;
}

static void slam_free(os_dataset *base) {
    slam_ds *d = (slam_ds *)base;
    for (int64_t i = 0; i < base->n; i++) os_free(d->item[i].wav), os_free(d->item[i].ids), os_free(d->item[i].err);
    for (int k = 0; k < RING; k++) os_free(d->ring[k].ids), os_free(d->ring[k].labels), os_free(d->ring[k].speech);
    if (d->map) munmap(d->map, d->mapn);
    if (d->fd >= 0) close(d->fd);
    os_tok_free(d->tok);
    os_free(d->rec);
    os_free(d->item), os_free(d->skip), os_free(d->audio), os_free(d);
}

static char *dup_text(const char *t) {
    size_t n = strlen(t);
    char *s = os_alloc(n + 1, "record error message");
    memcpy(s, t, n + 1);
    return s;
}

// the readable file a relative WAV path names: next to the dataset file first, then from the current directory
static char *resolve_wav(const char *dataset, const char *wav, int64_t line) {
    char buf[8192];
    const char *slash = strrchr(dataset, '/');
    if (wav[0] != '/' && slash) {
        snprintf(buf, sizeof buf, "%.*s/%s", (int)(slash - dataset), dataset, wav);
        if (access(buf, R_OK) == 0) goto found;
    }
    snprintf(buf, sizeof buf, "%s", wav);
    if (access(buf, R_OK) == 0) goto found;
    if (wav[0] != '/' && slash)
        os_errf("%s:%lld: field 'source_wav': cannot read '%s' (looked next to the dataset, %.*s/%s, and from the current directory): %m",
                dataset, (long long)line, wav, (int)(slash - dataset), dataset, wav);
    else
        os_errf("%s:%lld: field 'source_wav': cannot read '%s': %m", dataset, (long long)line, wav);
    return NULL;
found:
    if (os_audio_check(buf) < 0) {   // the header, probed at open (docs/speech.md): not when the sample is reached
        os_err_ctx("%s:%lld: field 'source_wav'", dataset, (long long)line);
        return NULL;
    }
    size_t n = strlen(buf);
    char *s = os_alloc(n + 1, "wav path");
    memcpy(s, buf, n);
    return s;
}

// the checks of one record at open: 0 with *wav (its readable WAV, or NULL) and *empty (its empty answer: skipped),
// or -1 + message naming path:line
static int check_record(slam_ds *d, size_t off, size_t len, int64_t line, char **wav, int *empty) {
    const char *path = d->base.path;
    *wav = NULL, *empty = 0;
    int64_t bad = os_utf8_invalid_at(d->map + off, len);
    if (bad >= 0) return os_errf("%s:%lld: not valid UTF-8 (byte %lld of the record)", path, (long long)line, (long long)bad);
    if (os_jsonrec_no_nul(d->map + off, len, path, line) < 0) return -1;
    cJSON *o = cJSON_ParseWithLength(d->map + off, len);
    if (!o) {
        const char *e = cJSON_GetErrorPtr();
        long long at = e && e >= d->map + off && e <= d->map + off + len ? (long long)(e - (d->map + off)) : -1;
        return os_errf("%s:%lld: malformed JSON (near byte %lld of the record)", path, (long long)line, at);
    }
    os_slam_record r;
    int rc = os_slam_record_read(o, path, line, d->c.A, d->c.prompt_only, &r);
    if (rc == 0 && d->c.prompt_only) r.empty = NULL;   // infer: a record without an answer still gets its line
    if (rc == 0 && !r.empty && r.wav && d->c.no_speech)   // found now, not when the sample is first drawn
        rc = os_errf("%s:%lld: field 'source_wav': the record has a spoken question ('%s') but the model has no "
                     "speech encoder (--speech_encoder DIR, docs/speech.md)", path, (long long)line, r.wav);
    if (rc == 0 && !r.empty && r.wav && !(*wav = resolve_wav(path, r.wav, line))) rc = -1;
    if (rc == 0 && r.empty) {
        *empty = 1;
        if (d->base.skipped++ < WARN_MAX) os_info("%s:%lld: record skipped (counted): %s", path, (long long)line, r.empty);
    }
    cJSON_Delete(o);
    return rc;
}

static int read_all(slam_ds *d) {
    const char *path = d->base.path;
    os_jsonrec jr;
    if (os_jsonrec_begin(&jr, d->map, d->mapn, path) < 0) return -1;
    int64_t cap = 0;
    size_t off, len;
    int64_t line;
    int got;
    while ((got = os_jsonrec_next(&jr, &off, &len, &line)) == 1) {
        if (!(line & 0xfff) && os_stop_signal)   // a large file: a stop signal is acted on while it is read
            return os_errf("%s: %s received while reading the dataset (line %lld): stopped before the first step", path,
                           os_stop_signal == SIGINT ? "SIGINT" : "SIGTERM", (long long)line);
        char *wav;
        int empty;
        int rc = check_record(d, off, len, line, &wav, &empty);
        if (rc < 0 && !d->c.keep_bad) return -1;
        if (rc == 0 && empty) continue;
        if (d->base.n == cap) {
            int64_t nc = cap ? 2 * cap : 1024;
            slam_item *ni = os_alloc(sizeof(slam_item) * (size_t)nc, "dataset records");
            if (cap) memcpy(ni, d->item, sizeof(slam_item) * (size_t)cap);
            os_free(d->item);
            d->item = ni, cap = nc;
        }
        slam_item *it = &d->item[d->base.n++];
        it->off = (int64_t)off, it->len = (int64_t)len, it->line = line, it->wav = wav;
        if (rc < 0) it->err = dup_text(os_errmsg()), d->base.bad++;   // keep_bad: its get fails with this message
    }
    if (got < 0) return -1;
    if (d->base.n == 0) return os_errf("%s: no usable records (%lld skipped with an empty answer)", path, (long long)d->base.skipped);
    return 0;
}

os_dataset *os_slam_open(const char *path, const os_slam_config *c) {
    if (c->G < 1) {
        os_errf("%s: SLAM-Omni records need a model with audio layers (--model_type slam_omni, code_layer >= 1)", path);
        return NULL;
    }
    slam_ds *d = os_alloc(sizeof *d, "dataset");
    d->c = *c;
    if (d->c.speech_positions <= 0) d->c.speech_positions = OS_SPEECH_POSITIONS;
    d->base.path = path, d->base.get = slam_get, d->base.free = slam_free, d->base.wav_path = slam_wav, d->base.live = RING;
    d->base.record = slam_record;
    int fd = d->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int rc = 0;
    if (fd < 0 || fstat(fd, &st) < 0) rc = os_errf("%s: cannot open the dataset: %m", path);
    else if (st.st_size == 0) rc = os_errf("%s: the dataset is empty", path);
    if (rc == 0) {
        d->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (d->map == MAP_FAILED) d->map = NULL, rc = os_errf("%s: cannot map the dataset: %m", path);
        else d->st = st, d->mapn = (size_t)st.st_size, d->base.bytes = (int64_t)d->mapn, d->base.digest = os_fnv1a(OS_FNV_BASIS, d->map, d->mapn);
    }
    if (rc == 0 && !(d->tok = os_tok_load(c->tokenizer_json))) rc = -1;
    if (rc == 0 && os_tok_vocab_size(d->tok) > c->T - 64)
        rc = os_errf("%s: the tokenizer has %d ids but the model's text vocabulary (padded_text_vocabsize %lld) leaves %lld "
                     "for text before its 64 special ids", c->tokenizer_json, os_tok_vocab_size(d->tok), (long long)c->T,
                     (long long)(c->T - 64));
    if (rc == 0) rc = read_all(d);
    if (d->map) munmap(d->map, d->mapn), d->map = NULL;   // from here on each record is read from the file (pread)
    if (rc < 0) {
        slam_free(&d->base);
        return NULL;
    }
    d->skip = os_alloc((size_t)d->base.n, "skip flags");
    d->base.lazy_skipped = d->skip;
    return &d->base;
}
