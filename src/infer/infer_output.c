// omnishard infer --output_file: what may be written, the lock, the settings file (infer_output.h).
#include "infer/infer_output.h"
#include "core/alloc.h"
#include "core/err.h"
#include "infer/infer_fingerprint.h"
#include "io/atomic.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SETTINGS_TAG "omnishard infer output settings"

void os_infer_output_settings_path(const char *out, char *buf, size_t cap) { snprintf(buf, cap, "%s.run.json", out); }

// ---- where the output lies ----

// a file that marks a directory as a model's or a checkpoint's, or NULL
static const char *model_marker(const char *dir) {
    static const char *const MARK[] = {"config.json", "model.safetensors", "model.safetensors.index.json",
                                       "adapter_config.json", "adapter_model.safetensors", "slam_omni.json",
                                       "manifest.json", "pytorch_model.bin"};
    char p[PATH_MAX + 64];
    for (size_t i = 0; i < sizeof MARK / sizeof MARK[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, MARK[i]);
        if (access(p, F_OK) == 0) return MARK[i];
    }
    return NULL;
}

static int same_file(const struct stat *x, const char *path) {
    struct stat y;
    return path && stat(path, &y) == 0 && x->st_dev == y.st_dev && x->st_ino == y.st_ino;
}

// The output is not the dataset and lies in no model, checkpoint or dataset directory. 0, or -1 + message
static int check_place(const char *out, const infer_args *a, const char *speech_encoder) {
    struct stat st;
    int exists = stat(out, &st) == 0;
    if (exists && !S_ISREG(st.st_mode))
        return os_errf("--output_file %s: not a regular file (omnishard infer writes, locks and resumes a regular "
                       "file): give a file path", out);
    if (exists && same_file(&st, a->dataset))
        return os_errf("--output_file %s is the dataset itself (--dataset %s: the same file): writing it would destroy "
                       "the records being read; give another --output_file", out, a->dataset);
    char dir[PATH_MAX], tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", out);
    if (!realpath(exists ? out : dirname(tmp), dir))
        return os_errf("--output_file %s: its directory %s: %s", out, dirname(tmp), strerror(errno));
    if (exists) snprintf(tmp, sizeof tmp, "%s", dir), snprintf(dir, sizeof dir, "%s", dirname(tmp));
    for (;;) {
        struct stat d;
        const char *mark = model_marker(dir);
        if (stat(dir, &d) == 0 && (same_file(&d, a->model) || same_file(&d, speech_encoder) || mark))
            return os_errf("--output_file %s lies inside %s %s (%s): an output among a model's or a checkpoint's "
                           "files could replace one of them; give a path outside it", out,
                           same_file(&d, a->model) ? "the model directory (--model)" :
                           same_file(&d, speech_encoder) ? "the speech encoder's directory" : "the directory", dir,
                           mark ? mark : "--model");
        if (stat(dir, &d) == 0 && S_ISDIR(d.st_mode) && same_file(&d, a->dataset))
            return os_errf("--output_file %s lies inside the dataset folder %s (--dataset): give a path outside it",
                           out, dir);
        if (!strcmp(dir, "/")) return 0;
        snprintf(tmp, sizeof tmp, "%s", dir);
        snprintf(dir, sizeof dir, "%s", dirname(tmp));
    }
}

// ---- what the file holds ----

typedef struct {
    int64_t size, lines, kept;   // bytes; complete infer lines in order and their bytes
    int64_t tail;                // bytes after the last newline (a killed run's partial line)
    int64_t bad_line;            // the first line that is not an infer line (1-based), 0: none
    char why[200];
} holding;

// is line (n bytes, without its newline) record `index`s infer line (a JSON object whose "index" is its position)?
// else why not into w
static int infer_line(const char *line, size_t n, int64_t index, char *w, size_t cap) {
    cJSON *o = cJSON_ParseWithLength(line, n);
    const cJSON *ix = o ? cJSON_GetObjectItemCaseSensitive(o, "index") : NULL;
    int ok = 0;
    if (!cJSON_IsObject(o)) snprintf(w, cap, "not a JSON object");
    else if (!cJSON_IsNumber(ix) || ix->valuedouble != (double)index)
        snprintf(w, cap, "its \"index\" must be %lld", (long long)index);
    else ok = 1;
    cJSON_Delete(o);
    return ok;
}

// scan the whole file through fd (never another descriptor: closing one would drop the fcntl lock). -1 + message
static int scan(int fd, const char *out, holding *h) {
    memset(h, 0, sizeof *h);
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    int64_t off = 0;
    for (;;) {
        if (len == cap && !(buf = realloc(buf, cap *= 2))) os_die("out of memory reading %s", out);
        if (!buf) os_die("out of memory reading %s", out);
        ssize_t k = pread(fd, buf + len, cap - len, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            free(buf);
            return os_errf("--output_file %s: cannot read it: %s", out, strerror(errno));
        }
        off += k, len += (size_t)k;
        size_t start = 0;
        char *nl;
        while ((nl = memchr(buf + start, '\n', len - start))) {
            size_t n = (size_t)(nl - (buf + start));
            if (!h->bad_line && infer_line(buf + start, n, h->lines, h->why, sizeof h->why))
                h->lines++, h->kept += (int64_t)n + 1;
            else if (!h->bad_line) h->bad_line = h->lines + 1;
            start += n + 1;
        }
        memmove(buf, buf + start, len - start);
        len -= start;
        if (k == 0) break;
    }
    h->size = off, h->tail = (int64_t)len;
    // a killed run's partial last line starts as every line does
    if (!h->bad_line && len && (len < 8 ? memcmp(buf, "{\"key\": ", len) : memcmp(buf, "{\"key\": ", 8)))
        h->bad_line = h->lines + 1, snprintf(h->why, sizeof h->why, "an unfinished line that is not an infer line");
    free(buf);
    return 0;
}

// what the file holds, in words
static void describe(const holding *h, const char *out, char *w, size_t cap) {
    if (h->bad_line)
        snprintf(w, cap, "it holds %lld bytes; %s:%lld: not line %lld of this run: %s", (long long)h->size, out,
                 (long long)h->bad_line, (long long)h->bad_line, h->why);
    else
        snprintf(w, cap, "it holds the lines of %lld records of an omnishard infer output%s", (long long)h->lines,
                 h->tail ? " and an unfinished line" : "");
}

// ---- the settings file ----

typedef struct {
    char model[PATH_MAX], speech[PATH_MAX], dataset[PATH_MAX];
    char fp_model[24], fp_speech[24], fp_dataset[24];
    const char *names[16];
    char values[16][48];
    int n;
} settings;

static int fingerprint(const char *path, int model, char *abs, char *hex) {
    abs[0] = hex[0] = 0;
    if (!path) return 0;
    if (!realpath(path, abs)) snprintf(abs, PATH_MAX, "%s", path);
    uint64_t h;
    if (os_fingerprint(path, model, &h) < 0) return -1;
    snprintf(hex, 24, "%016llx", (unsigned long long)h);
    return 0;
}

static void put(settings *s, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(settings *s, const char *name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s->names[s->n] = name;
    vsnprintf(s->values[s->n++], sizeof s->values[0], fmt, ap);
    va_end(ap);
}

// x as the shortest decimal text that reads back as x
static void put_real(settings *s, const char *name, double x) {
    char b[40];
    snprintf(b, sizeof b, "%.15g", x);
    if (strtod(b, NULL) != x) snprintf(b, sizeof b, "%.17g", x);
    put(s, name, "%s", b);
}

// this run's settings: what it reads (with fingerprints) and the options that change its lines
static int settings_of(settings *s, const infer_args *a, const os_gen_opts *g, const char *speech_encoder) {
    memset(s, 0, sizeof *s);
    if (fingerprint(a->model, 1, s->model, s->fp_model) < 0 || fingerprint(speech_encoder, 1, s->speech, s->fp_speech) < 0 ||
        fingerprint(a->dataset, 0, s->dataset, s->fp_dataset) < 0)
        return -1;
    const os_choice_opts *c = &g->choice;
    put(s, "max_new_tokens", "%lld", (long long)g->max_new_tokens);
    put(s, "do_sample", "%s", c->do_sample ? "true" : "false");
    put_real(s, "temperature", c->temperature);
    put(s, "top_k", "%lld", (long long)c->top_k);
    put_real(s, "top_p", c->top_p);
    put_real(s, "text_repetition_penalty", g->text_penalty);
    put_real(s, "audio_repetition_penalty", g->audio_penalty);
    put(s, "seed", "%llu", (unsigned long long)g->seed);
    put(s, "text_only", "%s", g->text_only ? "true" : "false");
    put(s, "show_prompt", "%s", a->show_prompt ? "true" : "false");
    put(s, "tf32", "%s", a->tf32 ? "true" : "false");
    return 0;
}

static void add_str(cJSON *o, const char *k, const char *v) {
    if (v && v[0]) cJSON_AddStringToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static int settings_write(const settings *s, const char *out) {
    cJSON *o = cJSON_CreateObject(), *d = cJSON_CreateObject();
    char host[256] = "", when[64] = "", path[PATH_MAX + 16], tmp[PATH_MAX];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    snprintf(tmp, sizeof tmp, "%s", out);
    cJSON_AddStringToObject(o, "omnishard", SETTINGS_TAG);
    cJSON_AddStringToObject(o, "output_file", basename(tmp));
    add_str(o, "model", s->model), add_str(o, "model_fingerprint", s->fp_model);
    add_str(o, "speech_encoder", s->speech), add_str(o, "speech_encoder_fingerprint", s->fp_speech);
    add_str(o, "dataset", s->dataset), add_str(o, "dataset_fingerprint", s->fp_dataset);
    for (int i = 0; i < s->n; i++) cJSON_AddStringToObject(d, s->names[i], s->values[i]);
    cJSON_AddItemToObject(o, "decoding", d);
    cJSON_AddNumberToObject(o, "pid", (double)getpid());
    cJSON_AddStringToObject(o, "host", host);
    cJSON_AddStringToObject(o, "started", when);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    os_infer_output_settings_path(out, path, sizeof path);
    int rc = text ? os_write_file_atomic(path, text, strlen(text)) : os_errf("%s: out of memory", path);
    free(text);
    return rc;
}

// the settings file beside out: *o NULL when there is none; -1 + message when it is there but not omnishard's
static int settings_read(const char *out, cJSON **o) {
    char path[PATH_MAX + 16];
    os_infer_output_settings_path(out, path, sizeof path);
    *o = NULL;
    if (access(path, F_OK) != 0) return 0;
    size_t n;
    char *text = os_read_file(path, &n);
    *o = text ? cJSON_ParseWithLength(text, n) : NULL;
    os_free(text);
    const cJSON *tag = cJSON_GetObjectItemCaseSensitive(*o, "omnishard");
    if (cJSON_IsString(tag) && !strcmp(tag->valuestring, SETTINGS_TAG)) return 0;
    cJSON_Delete(*o);
    *o = NULL;
    return os_errf("%s exists and is not omnishard infer's settings file for %s: omnishard replaces only its own "
                   "files; move it, or give another --output_file", path, out);
}

static const char *str_of(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

// one difference (what, was, now) appended to w
static void differ(char *w, size_t cap, const char *what, const char *was, const char *was_fp, const char *now,
                   const char *now_fp) {
    size_t k = strlen(w);
    if (!strcmp(was_fp, now_fp)) return;
    if (!was_fp[0] || !now_fp[0] || strcmp(was, now))
        snprintf(w + k, cap - k, "%sanother %s (begun with %s, this run: %s)", k ? "; " : "", what,
                 was[0] ? was : "none", now[0] ? now : "none");
    else
        snprintf(w + k, cap - k, "%sthe %s %s has changed since (content fingerprint %s, now %s)", k ? "; " : "", what,
                 now, was_fp, now_fp);
}

// --resume true: the file was begun with these settings; -1 + message naming every difference. A dataset whose
// content differs is named only beside another difference; alone, os_infer_output_start compares its records with
// the lines kept (begun_with: the dataset the file was begun with)
static int settings_match(const cJSON *o, const settings *s, const char *out, char *begun_with, size_t cap) {
    char w[6000] = "", ds[1200] = "";
    differ(w, sizeof w, "model", str_of(o, "model"), str_of(o, "model_fingerprint"), s->model, s->fp_model);
    differ(w, sizeof w, "speech encoder", str_of(o, "speech_encoder"), str_of(o, "speech_encoder_fingerprint"),
           s->speech, s->fp_speech);
    differ(ds, sizeof ds, "dataset", str_of(o, "dataset"), str_of(o, "dataset_fingerprint"), s->dataset, s->fp_dataset);
    if (ds[0]) snprintf(begun_with, cap, "%s", str_of(o, "dataset"));
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "decoding");
    for (int i = 0; i < s->n; i++) {
        const char *was = str_of(d, s->names[i]);
        size_t k = strlen(w);
        if (strcmp(was, s->values[i]))
            snprintf(w + k, sizeof w - k, "%s--%s %s (begun with %s)", k ? "; " : "", s->names[i], s->values[i],
                     was[0] ? was : "nothing recorded");
    }
    if (!w[0]) return 0;
    if (ds[0]) snprintf(w + strlen(w), sizeof w - strlen(w), "; %s", ds);
    return os_errf("--resume true: %s was begun with other settings (its settings file %s.run.json): %s. Give the "
                   "same ones to continue it, or --overwrite true to decode it anew", out, out, w);
}

// ---- the run's file ----

// the lock: 0; -1 + message naming the holder's PID
static int lock(int fd, const char *out) {
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &l) == 0) return 0;
    if (errno == ENOLCK || errno == EOPNOTSUPP) {
        os_info("omnishard infer: warning: --output_file %s: the file system does not lock files; run one infer per "
                "output file", out);
        return 0;
    }
    struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    long pid = fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK ? (long)q.l_pid : 0;
    return os_errf("--output_file %s is being written by another omnishard infer (PID %ld): two runs into one file "
                   "would mix their lines; wait for it to end, or give another --output_file", out, pid);
}

static int checks(os_infer_out *o, const infer_args *a, const os_gen_opts *g, const char *speech_encoder) {
    const char *out = o->path;
    holding h;
    char what[600];
    if (lock(o->fd, out) < 0 || scan(o->fd, out, &h) < 0) return -1;
    describe(&h, out, what, sizeof what);
    if (h.size && h.bad_line)
        return os_errf("--output_file %s exists and is not an omnishard infer output: %s; %s", out, what,
                       a->resume || a->overwrite ? "--resume and --overwrite act only on omnishard infer's own output: "
                                                   "give another --output_file"
                                                 : "give another --output_file");
    if (h.size && !a->resume && !a->overwrite)
        return os_errf("--output_file %s exists: %s. Give --resume true to decode the rest, --overwrite true to "
                       "decode it anew, or another --output_file", out, what);
    cJSON *old;
    settings *s = os_alloc(sizeof *s, "infer settings");
    o->settings = s;
    if (settings_read(out, &old) < 0) return -1;
    int rc = settings_of(s, a, g, speech_encoder);
    if (rc == 0 && a->resume && h.size && !old)
        rc = os_errf("--resume true: %s has no settings file (%s.run.json), so what it continues cannot be checked: "
                     "give --overwrite true to decode it anew", out, out);
    if (rc == 0 && a->resume && h.size) rc = settings_match(old, s, out, o->begun_with, sizeof o->begun_with);
    cJSON_Delete(old);
    o->done = a->resume ? h.lines : 0, o->kept = a->resume ? h.kept : 0;   // --overwrite: 0, emptied at the start
    return rc;
}

int os_infer_output_open(os_infer_out *o, const infer_args *a, const os_gen_opts *g, const char *speech_encoder) {
    *o = (os_infer_out){.path = a->output_file, .fd = -1};
    if (a->resume && a->overwrite) return os_errf("--resume true and --overwrite true: give one of them");
    if (check_place(o->path, a, speech_encoder) < 0) return -1;
    int created = 0;
    o->fd = open(o->path, O_RDWR | O_CLOEXEC);
    if (o->fd < 0 && errno == ENOENT) o->fd = open(o->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644), created = 1;
    if (o->fd < 0) return os_errf("--output_file %s: cannot write it: %s", o->path, strerror(errno));
    o->created = created;
    if (checks(o, a, g, speech_encoder) == 0) return 0;
    os_free(o->settings);
    o->settings = NULL;
    if (created) unlink(o->path);
    close(o->fd);
    o->fd = -1;
    return -1;
}

// the record's field k (missing: null) equals the line's
static int same_field(const cJSON *rec, const cJSON *line, const char *k) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(rec, k), *b = cJSON_GetObjectItemCaseSensitive(line, k);
    if (!a || cJSON_IsNull(a)) return !b || cJSON_IsNull(b);
    return b && cJSON_Compare(a, b, 1);
}

// the kept lines are the lines of ds's records at their places (error lines not compared); -1 + message
static int same_records(const os_infer_out *o, os_dataset *ds) {
    static const char *const FIELDS[] = {"key", "source_text", "target_text"};
    char *buf = os_alloc_uninit((size_t)o->kept + 1, "kept lines");
    int64_t got = 0, line = 0;
    while (got < o->kept) {
        ssize_t k = pread(o->fd, buf + got, (size_t)(o->kept - got), (off_t)got);
        if (k <= 0 && errno == EINTR) continue;
        if (k <= 0) return os_free(buf), os_errf("--output_file %s: cannot read it: %s", o->path, strerror(errno));
        got += k;
    }
    int rc = 0;
    for (char *s = buf, *nl; rc == 0 && line < o->done && (nl = memchr(s, '\n', (size_t)(buf + o->kept - s)));
         s = nl + 1, line++) {
        const char *text = "{}";
        size_t len = 2;
        int64_t at = 0;
        if (ds->record) ds->record(ds, line, &text, &len, &at);
        cJSON *l = cJSON_ParseWithLength(s, (size_t)(nl - s)), *r = cJSON_ParseWithLength(text, len);
        const char *differs = NULL;
        for (size_t f = 0; f < 3 && r && !cJSON_GetObjectItemCaseSensitive(l, "error"); f++)
            if (!differs && !same_field(r, l, FIELDS[f])) differs = FIELDS[f];
        if (differs)
            rc = os_errf("--resume true: %s was begun with another dataset%s%s%s: record %lld (%s:%lld) is not the one "
                         "%s:%lld holds (its %s differs). Give the dataset it was begun with, or --overwrite true to "
                         "decode it anew", o->path, o->begun_with[0] ? " (" : "", o->begun_with,
                         o->begun_with[0] ? ")" : "", (long long)line, ds->path, (long long)at, o->path,
                         (long long)line + 1, differs);
        cJSON_Delete(l), cJSON_Delete(r);
    }
    os_free(buf);
    return rc;
}

int os_infer_output_start(os_infer_out *o, os_dataset *ds) {
    if (o->fd < 0) return 0;
    if (o->done > ds->n)
        return os_errf("--resume true: %s holds %lld records' lines, the dataset %lld records", o->path,
                       (long long)o->done, (long long)ds->n);
    if (same_records(o, ds) < 0) {
        if (o->created) unlink(o->path);
        return -1;
    }
    if (o->begun_with[0] && o->done)
        os_info("omnishard infer: note: the dataset has changed since %s was begun (with %s); its first %lld records, "
                "whose lines are kept, are the same, so the run continues", o->path, o->begun_with, (long long)o->done);
    if (ftruncate(o->fd, (off_t)o->kept) < 0 || lseek(o->fd, 0, SEEK_END) < 0)
        return os_errf("--output_file %s: cannot cut off its unfinished last line: %s", o->path, strerror(errno));
    o->bytes = o->kept;
    // the settings file once the file holds only what they describe (its kept lines, or nothing)
    return settings_write(o->settings, o->path);
}

int os_infer_output_write(os_infer_out *o, const char *buf, size_t n, int64_t records) {
    const char *p = buf;
    size_t left = n;
    while (left > 0) {
        ssize_t k = write(o->fd, p, left);
        if (k < 0 && errno == EINTR) continue;
        if (k > 0) {
            p += k, left -= (size_t)k;
            continue;
        }
        int e = k < 0 ? errno : ENOSPC;
        int cut = ftruncate(o->fd, (off_t)o->bytes) == 0 && lseek(o->fd, 0, SEEK_END) >= 0;
        return os_errf("--output_file %s: write failed: %s; %s %lld records' complete lines: free the space and run "
                       "again with --resume true to decode the rest", o->path, strerror(e),
                       cut ? "the file holds its first" : "its unfinished last line could not be cut off; it holds",
                       (long long)records);
    }
    o->bytes += (int64_t)n;
    return 0;
}

int os_infer_output_close(os_infer_out *o) {
    os_free(o->settings);
    o->settings = NULL;
    if (o->fd < 0) return 0;
    int rc = fsync(o->fd) < 0 && errno != EINVAL ? os_errf("--output_file %s: %s", o->path, strerror(errno)) : 0;
    if (close(o->fd) < 0 && rc == 0) rc = os_errf("--output_file %s: %s", o->path, strerror(errno));
    o->fd = -1;
    return rc;
}
