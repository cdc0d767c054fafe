#include "train/steplog.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "core/timer.h"
#include "io/atomic.h"
#include "io/runfiles.h"
#include "train/stop.h"
#include "train/tblog.h"
#include "zero/comm.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// rewrite the log with only its lines of steps <= keep (a line cut by a crash is dropped too); l->bytes, l->sum: what
// it holds then
static int keep_steps(os_steplog *l, const char *path, int64_t keep) {
    size_t n;
    l->bytes = 0, l->sum = OS_FNV_BASIS;
    if (access(path, F_OK) != 0) return 0;   // no log yet (resumed into a new output directory)
    char *text = os_read_file(path, &n);
    if (!text) return -1;
    char *out = os_alloc(n + 1, "log"), *line = text, *nl;
    size_t k = 0;
    int64_t dropped = 0;
    for (; *line; line = nl ? nl + 1 : line + strlen(line)) {
        nl = strchr(line, '\n');
        if (!nl) { dropped++; break; }   // no newline: cut mid-line
        cJSON *o = cJSON_ParseWithLength(line, (size_t)(nl - line));
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "step");
        if (cJSON_IsNumber(st) && st->valuedouble <= (double)keep) memcpy(out + k, line, (size_t)(nl - line) + 1), k += (size_t)(nl - line) + 1;
        else dropped++;
        cJSON_Delete(o);
    }
    int rc = dropped ? os_write_file_atomic(path, out, k) : 0;
    l->bytes = (int64_t)k, l->sum = os_fnv1a(OS_FNV_BASIS, out, k);
    if (dropped && rc == 0) os_info("omnishard: %s: dropped %lld line(s) after step %lld (the resumed run logs those steps again)", path,
                         (long long)dropped, (long long)keep);
    os_free(out), os_free(text);
    return rc;
}

int os_steplog_open(os_steplog *l, const char *output_dir, int root, int64_t total, int64_t keep_through) {
    memset(l, 0, sizeof *l);
    l->fd = -1;
    l->root = root, l->total = total, l->t_start = os_now(), l->tty = isatty(2);
    l->done = keep_through > 0 ? keep_through : 0, l->resumed = keep_through >= 0;
    if (!root) return 0;
    snprintf(l->path, sizeof l->path, "%s/logging.jsonl", output_dir);
    l->sum = OS_FNV_BASIS;
    if (keep_through >= 0 && keep_steps(l, l->path, keep_through) < 0) return -1;
    // read-write: the charts at the end of the run read the log through this descriptor (os_sft_run's after)
    l->fd = open(l->path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | (keep_through >= 0 ? 0 : O_TRUNC), 0666);
    if (l->fd < 0) return os_errf("%s: cannot write the log: %s", l->path, strerror(errno));
    return os_runfiles_record_appended(l->path, l->bytes, l->sum);
}

int os_steplog_tensorboard(os_steplog *l, const char *tb_dir) {
    if (!l->root) return 0;
    int created = access(tb_dir, F_OK) != 0;
    if (os_tfevents_open(&l->tb, tb_dir) < 0) return -1;
    if (created && os_runfiles_record_dir(tb_dir) < 0) return -1;
    os_info("omnishard sft: TensorBoard events in %s", l->tb.path);
    // a resumed run: TensorBoard drops what the earlier run logged after the checkpoint, as logging.jsonl does
    if (l->resumed && os_tfevents_session_start(&l->tb, l->done + 1) < 0) return -1;
    return os_runfiles_record_appended(l->tb.path, l->tb.bytes, l->tb.sum);
}

int os_steplog_record(os_steplog *l) {
    if (!l->root || l->fd < 0) return 0;
    int rc = os_runfiles_record_appended(l->path, l->bytes, l->sum);
    return rc == 0 && l->tb.f ? os_runfiles_record_appended(l->tb.path, l->tb.bytes, l->tb.sum) : rc;
}

// a stream for the next line (NULL after a failure: nothing more is written)
static FILE *line_begin(os_steplog *l) {
    if (l->failed) return NULL;
    FILE *f = open_memstream(&l->line, &l->line_len);
    if (!f) {
        l->failed = 1;
        os_errf("%s: cannot format a line: %s", l->path, strerror(errno));
        os_stop_write_failed();
    }
    return f;
}

// append the formatted line in one write; on failure cut the file back to its last complete line
static void line_end(os_steplog *l, FILE *f) {
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        l->failed = 1;
        os_errf("%s: cannot format a line", l->path);
    }
    off_t start = lseek(l->fd, 0, SEEK_END);
    const char *p = l->line;
    size_t left = l->failed ? 0 : l->line_len;
    while (left > 0) {
        ssize_t w = write(l->fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            l->failed = 1;
            os_errf("%s: write failed: %s (the log keeps its complete lines)", l->path, w < 0 ? strerror(errno) : "no progress");
            if (start >= 0 && ftruncate(l->fd, start) != 0) os_err_ctx("%s: cut back to %lld bytes failed", l->path, (long long)start);
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    if (!l->failed) l->bytes += (int64_t)l->line_len, l->sum = os_fnv1a(l->sum, l->line, l->line_len);
    if (!l->failed && l->tb.f && !l->tb.failed && os_tblog_line(&l->tb, l->line, l->line_len) < 0) {
        l->tb.failed = 1;   // the run ends at the step boundary, naming the event file
        os_stop_write_failed();
    }
    free(l->line);
    l->line = NULL;
    if (l->failed) os_stop_write_failed();
}

static void num(FILE *f, const char *key, double v) {
    if (isfinite(v)) fprintf(f, ", \"%s\": %.9g", key, v);
    else fprintf(f, ", \"%s\": null", key);
}

// the step's values over all ranks (collective): the windowed ones (train/steplog.h) and the rest of the line
typedef struct {
    double win[OS_WIN_N];        // this step's loss, acc, term losses and accuracies (NAN: no target)
    double tokens, head_moved, phase[OS_NPHASE], compute_max, rss_max;
} step_values;

static void reduce_step(os_steplog *l, int G, double loss_sum, int64_t nonempty, double term_loss,
                        const os_step_stats *acc, step_values *sv) {
    // [loss_sum, tokens, sum[0..G], count[0..G], correct[0..G], phase[OS_NPHASE], head rows moved]
    double v[2 + 3 * (OS_MAX_G + 1) + OS_NPHASE + 1];
    int n = 2 + 3 * (G + 1);
    v[0] = loss_sum, v[1] = (double)acc->tokens, v[n + OS_NPHASE] = (double)acc->head_moved;
    for (int t = 0; t <= G; t++)
        v[2 + t] = acc->sum[t], v[3 + G + t] = (double)acc->count[t], v[4 + 2 * G + t] = (double)acc->correct[t];
    for (int i = 0; i < OS_NPHASE; i++) v[n + i] = l->phase[i];
    comm_allreduce_sum_f64(v, n + OS_NPHASE + 1);
    // the slowest rank's compute (microseconds) and the largest peak RSS over the ranks (bytes)
    int64_t mx[2] = {(int64_t)(l->phase[OS_PH_COMPUTE] * 1e6), os_peak_rss_bytes()};
    comm_allreduce_max_i64(mx, 2);
    double targets = 0.0, correct = 0.0;   // target tokens of the step over all ranks and loss terms
    for (int t = 0; t <= G; t++) targets += v[3 + G + t], correct += v[4 + 2 * G + t];
    for (int i = 0; i < OS_WIN_N; i++) sv->win[i] = NAN;
    sv->win[OS_WIN_LOSS] = (nonempty && targets > 0 ? v[0] / (double)nonempty : NAN) + term_loss;   // none: null
    sv->win[OS_WIN_ACC] = targets > 0 ? correct / targets : NAN;
    for (int t = 0; t <= G; t++) {
        double c = v[3 + G + t];
        sv->win[OS_WIN_TERM + t] = c ? v[2 + t] / c : NAN;
        sv->win[OS_WIN_TACC + t] = c ? v[4 + 2 * G + t] / c : NAN;
    }
    sv->tokens = v[1], sv->head_moved = v[n + OS_NPHASE];
    for (int i = 0; i < OS_NPHASE; i++) sv->phase[i] = v[n + i] / comm_size();
    sv->compute_max = (double)mx[0] / 1e6, sv->rss_max = (double)mx[1];
    l->tokens_total += v[1], l->targets_total += targets;
}

// add the step's values to the window; on a logged step, replace them by the window's means and start a new one
static void window(os_steplog *l, double *w, int write) {
    for (int i = 0; i < OS_WIN_N; i++)
        if (isfinite(w[i])) l->win_sum[i] += w[i], l->win_n[i]++;
    if (!write) return;
    for (int i = 0; i < OS_WIN_N; i++) {
        w[i] = l->win_n[i] ? l->win_sum[i] / (double)l->win_n[i] : NAN;
        l->win_sum[i] = 0.0, l->win_n[i] = 0;
    }
}

// rank 0's progress line: ms-swift's keys (token_acc: logging.jsonl's acc and token_acc), the clock human-readable
static void progress(const os_steplog *l, int64_t step, const step_values *sv, double lr, double gnorm, double epoch,
                     double el, double eta) {
    char et[64], rt[64];
    os_format_duration(el, et, sizeof et);
    os_format_duration(eta, rt, sizeof rt);
    fprintf(stderr, "%sstep %lld/%lld (%.2f%%)  loss %.4f  token_acc %.4f  grad_norm %.3g  learning_rate %.3g  memory(GiB) %.2f  "
            "train_speed(iter/s) %.3g  epoch %.2f  %.0f tok/s  elapsed_time %s  remaining_time %s%s",
            l->tty ? "\r" : "", (long long)step, (long long)l->total, 100.0 * (double)step / (double)l->total,
            sv->win[OS_WIN_LOSS], sv->win[OS_WIN_ACC], gnorm, lr, sv->rss_max / OS_GIB,
            (double)(step - l->done) / (el > 0 ? el : 1e-9), epoch, l->tokens_total / (el > 0 ? el : 1e-9), et, rt,
            l->tty ? "   " : "\n");
    fflush(stderr);
}

// ms-swift's keys (docs/training.md, "Logged per step")
static void swift_keys(FILE *f, const os_steplog *l, int64_t step, const step_values *sv, double lr, double el, double eta) {
    char t[64];
    num(f, "learning_rate", lr);
    num(f, "acc", sv->win[OS_WIN_ACC]);
    num(f, "token_acc", sv->win[OS_WIN_ACC]);   // newer ms-swift's name of the same
    num(f, "memory(GiB)", sv->rss_max / OS_GIB);
    num(f, "train_speed(iter/s)", (double)(step - l->done) / (el > 0 ? el : 1e-9));
    fprintf(f, ", \"global_step/max_steps\": \"%lld/%lld\"", (long long)step, (long long)l->total);
    fprintf(f, ", \"percentage\": \"%.2f%%\"", 100.0 * (double)step / (double)l->total);
    os_format_duration(el, t, sizeof t);
    fprintf(f, ", \"elapsed_time\": \"%s\"", t);
    os_format_duration(eta, t, sizeof t);
    fprintf(f, ", \"remaining_time\": \"%s\"", t);
}

void os_steplog_step(os_steplog *l, const os_model *m, int64_t step, double epoch, double loss_sum, int64_t nonempty,
                     double term_loss, const os_step_stats *acc, double lr, double gnorm,
                     const double *bucket_norms, double seconds,
                     const zr_runtime *rt, int write) {
    int G = m->oc.G;
    step_values sv;
    reduce_step(l, G, loss_sum, nonempty, term_loss, acc, &sv);
    if (!l->root) return;
    if (isfinite(sv.win[OS_WIN_LOSS])) l->run_loss += sv.win[OS_WIN_LOSS], l->run_steps++;
    window(l, sv.win, write);
    if (!write) return;
    // this run's steps so far set the pace (a resumed run's clock starts at its first step, not at step 1)
    double el = os_now() - l->t_start, eta = el / (double)(step - l->done) * (double)(l->total - step);
    FILE *f = line_begin(l);
    if (!f) return;
    fprintf(f, "{\"step\": %lld", (long long)step);
    num(f, "epoch", epoch);
    num(f, "loss", sv.win[OS_WIN_LOSS]);
    num(f, "text_loss", sv.win[OS_WIN_TERM]);
    num(f, "text_acc", sv.win[OS_WIN_TACC]);
    for (int t = 1; t <= G; t++) {
        char k[32];
        snprintf(k, sizeof k, "audio_loss_%d", t - 1);
        num(f, k, sv.win[OS_WIN_TERM + t]);
        snprintf(k, sizeof k, "audio_acc_%d", t - 1);
        num(f, k, sv.win[OS_WIN_TACC + t]);
    }
    if (term_loss != 0.0) num(f, "param_loss", term_loss);
    num(f, "lr", lr);
    num(f, "grad_norm", gnorm);
    // per-module gradient norms (before clipping): every non-layer bucket by name, the decoder layers together
    double layers = 0.0;
    for (int b = 0; b < m->reg.nb; b++) {
        if (!m->reg.b[b].trainable) continue;
        if (!strncmp(m->reg.b[b].name, "layers.", 7)) {
            layers += bucket_norms[b] * bucket_norms[b];
            continue;
        }
        char k[96];
        snprintf(k, sizeof k, "grad_norm/%s", m->reg.b[b].name);
        num(f, k, bucket_norms[b]);
    }
    num(f, "grad_norm/layers", sqrt(layers));
    num(f, "tokens_per_s", sv.tokens / (seconds > 0 ? seconds : 1e-9));
    num(f, "step_time_s", seconds);
    static const char *phases[OS_NPHASE] = {"time/data_s", "time/compute_s", "time/gather_wait_s", "time/reduce_wait_s",
                                            "time/optimizer_s", "time/cpu_s"};
    for (int i = 0; i < OS_NPHASE; i++) num(f, phases[i], sv.phase[i]);
    num(f, "time/compute_max_s", sv.compute_max);
    fprintf(f, ", \"head_rows_moved\": %lld", (long long)sv.head_moved);
    for (int64_t i = 0; i < l->n_sample_ids; i++) fprintf(f, "%s%lld", i ? ", " : ", \"sample_ids\": [", (long long)l->sample_ids[i]);
    if (l->n_sample_ids) fprintf(f, "]");
    fprintf(f, ", \"model_state_bytes\": %lld", (long long)zr_model_state_bytes(rt));
    fprintf(f, ", \"gather_bytes\": %lld", (long long)rt->gather_bytes);
    num(f, "peak_rss_gb", (double)os_peak_rss_bytes() / 1e9);
    os_pool_stats ps = os_alloc_pool_stats();
    num(f, "mem/pool_held_gb", (double)ps.held / 1e9);
    num(f, "mem/pool_mapped_gb", (double)ps.mapped / 1e9);
    num(f, "time/elapsed_s", el);
    num(f, "time/remaining_s", eta);
    swift_keys(f, l, step, &sv, lr, el, eta);
    fprintf(f, "}\n");
    line_end(l, f);
    progress(l, step, &sv, lr, gnorm, epoch, el, eta);
}

void os_steplog_eval(os_steplog *l, const os_model *m, int64_t step, double epoch, const os_eval_result *r) {
    if (!l->root) return;
    FILE *f = line_begin(l);
    if (!f) return;
    fprintf(f, "{\"step\": %lld", (long long)step);
    num(f, "epoch", epoch);
    num(f, "eval_loss", r->samples ? r->loss : NAN);
    for (int t = 0; t <= m->oc.G; t++) {
        char k[40], a[40];
        if (t == 0) snprintf(k, sizeof k, "eval_text_loss"), snprintf(a, sizeof a, "eval_text_acc");
        else snprintf(k, sizeof k, "eval_audio_loss_%d", t - 1), snprintf(a, sizeof a, "eval_audio_acc_%d", t - 1);
        num(f, k, r->count[t] ? r->sum[t] / (double)r->count[t] : NAN);
        num(f, a, r->count[t] ? (double)r->correct[t] / (double)r->count[t] : NAN);
    }
    int64_t right = 0, all = 0;   // ms-swift's eval_token_acc: every term's targets, token-weighted
    for (int t = 0; t <= m->oc.G; t++) right += r->correct[t], all += r->count[t];
    num(f, "eval_token_acc", all ? (double)right / (double)all : NAN);
    num(f, "eval_samples", (double)r->samples);
    num(f, "eval_tokens", (double)r->tokens);
    num(f, "eval_runtime_s", r->seconds);
    fprintf(f, "}\n");
    line_end(l, f);
    fprintf(stderr, "%seval at step %lld/%lld: eval_loss %.4f (%lld samples, %.1fs)%s\n", l->tty ? "\r" : "", (long long)step,
            (long long)l->total, r->loss, (long long)r->samples, r->seconds, l->tty ? "            " : "");
    fflush(stderr);
}

int os_steplog_close(os_steplog *l) {
    int rc = 0;
    if (l->fd >= 0) {
        if (fsync(l->fd) != 0 && errno != EINVAL) rc = os_errf("%s: fsync failed: %s", l->path, strerror(errno));
        if (close(l->fd) != 0 && rc == 0) rc = os_errf("%s: close failed: %s", l->path, strerror(errno));
    }
    if (l->root && l->tty) fputc('\n', stderr);
    l->fd = -1;
    int had_tb = l->tb.f != NULL;
    if (os_tfevents_close(&l->tb) < 0 && rc == 0) rc = -1;
    if (rc == 0 && l->root && *l->path) rc = os_runfiles_record_appended(l->path, l->bytes, l->sum);
    if (rc == 0 && had_tb) rc = os_runfiles_record_appended(l->tb.path, l->tb.bytes, l->tb.sum);
    return rc;
}
