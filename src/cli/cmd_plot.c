// omnishard plot: the loss curves of a logging.jsonl (total, text, each audio layer, evaluation) in one SVG file,
// and one chart per metric in images/ (cli/plot_images.h).
#include "cli/commands.h"
#include "cli/plot_images.h"
#include "cli/plot_svg.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/opts.h"
#include "io/atomic.h"
#include "io/runfiles.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: omnishard plot LOGGING_JSONL [-o OUT.svg] [--log] [--images DIR] [--smooth W]\n"
    "  draws loss, text_loss, audio_loss_0.. and eval_loss (and eval_text_loss, ..) against the step in one chart,\n"
    "  and one chart per metric (loss terms, accuracies, learning_rate, grad_norm, memory(GiB), evaluation) in\n"
    "  images/ next to the log, as ms-swift's images/: train_loss.png, eval_loss.png, ... with the same charts as .svg\n"
    "  beside them (docs/dataset.md); omnishard sft draws them at the end of a run\n";

#define MAXS 64
typedef os_plot_series series;

static const char *const COLORS[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                                     "#17becf", "#bcbd22", "#7f7f7f", "#ff7f0e"};

static series *find(series *s, int *ns, const char *name) {
    for (int i = 0; i < *ns; i++)
        if (!strcmp(s[i].name, name)) return &s[i];
    if (*ns == MAXS) return NULL;
    series *n = &s[(*ns)++];
    memset(n, 0, sizeof *n);
    snprintf(n->name, sizeof n->name, "%s", name);
    return n;
}

// which keys are loss curves: loss, text_loss, audio_loss_N, eval_loss, eval_text_loss, eval_audio_loss_N
static int is_curve(const char *k) {
    const char *b = !strncmp(k, "eval_", 5) ? k + 5 : k;
    return !strcmp(b, "loss") || !strcmp(b, "text_loss") || !strncmp(b, "audio_loss_", 11);
}

// the series of the log f (named path in messages), read from its start; closes f
static int read_log(FILE *f, const char *path, series *s, int *ns) {
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    int64_t ln = 0;
    int rc = 0;
    while (getline(&line, &cap, f) > 0) {
        ln++;
        if (strspn(line, " \t\r\n") == strlen(line)) continue;
        cJSON *o = cJSON_Parse(line);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "step");
        if (!cJSON_IsObject(o) || !cJSON_IsNumber(st)) {
            cJSON_Delete(o);
            rc = os_errf("%s:%lld: expected a JSON object with a \"step\" (a logging.jsonl of omnishard sft)", path, (long long)ln);
            break;
        }
        for (const cJSON *v = o->child; v; v = v->next) {
            if (!v->string || !(is_curve(v->string) || os_plot_is_metric(v->string)) || !cJSON_IsNumber(v) ||
                !isfinite(v->valuedouble))
                continue;
            series *c = find(s, ns, v->string);
            if (c) os_plot_add(c, st->valuedouble, v->valuedouble);
        }
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    int curves = 0;
    for (int i = 0; i < *ns; i++) curves += is_curve(s[i].name);
    if (rc == 0 && curves == 0) rc = os_errf("%s: no loss values to plot", path);
    return rc;
}

// the loss curves in one chart (the combined picture, -o)
static void write_svg(FILE *o, series *s, int ns, int logy, const char *title) {
    os_plot_frame f = {.W = 900, .H = 520, .L = 70, .T = 40, .pw = 900 - 70 - 200, .ph = 520 - 40 - 50, .logy = logy};
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int i = 0; i < ns; i++)
        for (int64_t k = 0; is_curve(s[i].name) && k < s[i].n; k++) {
            double y = logy ? log10(fmax(s[i].y[k], 1e-12)) : s[i].y[k];
            x0 = fmin(x0, s[i].x[k]), x1 = fmax(x1, s[i].x[k]), y0 = fmin(y0, y), y1 = fmax(y1, y);
        }
    if (!logy && y0 > 0 && y0 < 0.25 * y1) y0 = 0;
    if (x1 <= x0) x0 -= 1, x1 += 1;
    if (y1 <= y0) y0 -= 0.5, y1 += 0.5;
    double pad = 0.04 * (y1 - y0);
    f.x0 = x0, f.x1 = x1, f.y0 = y0 - pad, f.y1 = y1 + pad;
    os_plot_begin(o, &f, title);
    os_plot_axes(o, &f, "loss");
    for (int i = 0, shown = 0; i < ns; i++) {
        if (!is_curve(s[i].name)) continue;
        const char *col = COLORS[shown % 10];
        int ev = !strncmp(s[i].name, "eval_", 5), main_curve = !strcmp(s[i].name, "loss") || !strcmp(s[i].name, "eval_loss");
        double *y = os_alloc(sizeof(double) * (size_t)s[i].n, "plot");
        for (int64_t k = 0; k < s[i].n; k++) y[k] = logy ? log10(fmax(s[i].y[k], 1e-12)) : s[i].y[k];
        os_plot_line(o, &f, s[i].x, y, s[i].n, col, main_curve ? 2.2 : 1.3, ev ? " stroke-dasharray=\"6 3\"" : "", s[i].name);
        for (int64_t k = 0; ev && k < s[i].n; k++)
            fprintf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", os_plot_px(&f, s[i].x[k]), os_plot_py(&f, y[k]), col);
        os_free(y);
        double ly = f.T + 10 + 18 * shown++, lx = f.L + f.pw;
        fprintf(o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"%s/>"
                   "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", lx + 14, ly, lx + 40, ly, col,
                ev ? " stroke-dasharray=\"6 3\"" : "", lx + 46, ly + 4, s[i].name);
    }
    fprintf(o, "</svg>\n");
}

// the combined loss chart (out; NULL: none) and one chart per metric (images/) of the logging.jsonl f (named in);
// 0, or -1 + message
static int plot(FILE *f, const char *in, const char *out, const char *images, int logy, double smooth, int *curves,
                int *charts) {
    series s[MAXS];
    int ns = 0;
    int rc = read_log(f, in, s, &ns);
    FILE *o = rc == 0 && out ? fopen(out, "w") : NULL;
    if (rc == 0 && out && !o) rc = os_errf("%s: cannot write: %m", out);
    if (rc == 0 && o) {
        write_svg(o, s, ns, logy, in);
        int bad = ferror(o);   // a failed write earlier than the last flush
        if (fclose(o) != 0 || bad) {
            rc = os_errf("%s: write failed: %m", out);
            unlink(out);   // no half-written picture
        }
    }
    *charts = rc == 0 ? os_plot_images(s, ns, images, smooth) : 0;
    if (*charts < 0) rc = -1;
    for (int i = 0; i < ns; i++) *curves += is_curve(s[i].name);
    for (int i = 0; i < ns; i++) os_free(s[i].x), os_free(s[i].y);
    return rc;
}

typedef struct {
    const char *output, *images;
    int log;
    double smooth;
} plot_args;

static const os_opt OPTS[] = {
    {.name = "output", .alias = "-o", .type = OS_OPT_STR, .off = offsetof(plot_args, output),
     .help = "the SVG file to write (default: loss.svg next to the log)"},
    {.name = "log", .type = OS_OPT_FLAG, .off = offsetof(plot_args, log), .help = "logarithmic loss axis"},
    {.name = "images", .type = OS_OPT_STR, .off = offsetof(plot_args, images), .metavar = "DIR",
     .help = "the folder of the per-metric charts (default: images/ next to the log)"},
    {.name = "smooth", .type = OS_OPT_F64, .off = offsetof(plot_args, smooth), .range = "[0,1)",
     .help = "smoothing of the training loss curves in images/ (not of learning_rate and the other metrics), ms-swift's: s[k] = W s[k-1] + (1 - W) value[k] "
             "(default 0.9; 0: none)"},
};

int cmd_plot(int argc, char **argv) {
    plot_args a = {.smooth = 0.9};
    const char *in = NULL;
    const os_opt_group g = {.title = "options", .opts = OPTS, .n = (int)(sizeof OPTS / sizeof OPTS[0]), .obj = &a};
    const os_opt_cmd c = {.command = "plot", .usage = USAGE, .groups = &g, .ngroups = 1, .positional = "LOGGING_JSONL",
                          .pos = &in};
    int rc = os_opts_parse(&c, argc, argv);
    if (rc == 1) return os_opts_usage(&c, stdout), 0;
    if (rc == 0 && !in) rc = os_errf("give the logging.jsonl to draw");
    if (rc < 0) return fprintf(stderr, "omnishard plot: %s\n", os_errmsg()), os_opts_usage(&c, stderr), 2;
    const char *out = a.output;
    int logy = a.log;
    char def[4200], img[4200];
    const char *slash = strrchr(in, '/');
    int dir_len = slash ? (int)(slash - in + 1) : 0;   // the log's folder, with its '/'
    if (!out) snprintf(def, sizeof def, "%.*sloss.svg", dir_len, in), out = def;
    if (!a.images) snprintf(img, sizeof img, "%.*simages", dir_len, in), a.images = img;
    int curves = 0, charts = 0;
    if (plot(os_fopen_read(in, "a logging.jsonl"), in, out, a.images, logy, a.smooth, &curves, &charts) < 0) {
        fprintf(stderr, "omnishard plot: %s\n", os_errmsg());
        return 1;
    }
    fprintf(stderr, "omnishard plot: %d curves -> %s; %d charts -> %s/\n", curves, out, charts, a.images);
    return 0;
}

int cli_plot_run(const char *run_dir, int log_fd) {
    char in[4200], img[4200];
    snprintf(in, sizeof in, "%s/logging.jsonl", run_dir);
    snprintf(img, sizeof img, "%s/images", run_dir);
    char why[256];
    if (!os_runfiles_proven(img, why, sizeof why)) {   // a user's images/ (io/runfiles.h): left as it is
        os_info("omnishard sft: %s is not omnishard's (%s): the charts are not drawn there (omnishard plot %s "
                "--images DIR draws them elsewhere)", img, why, in);
        return 0;
    }
    int curves = 0, charts = 0, fd = dup(log_fd);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return os_errf("%s: cannot read it again for the charts: %m", in);
    }
    rewind(f);   // (the descriptor is shared with the log's: it only appends, at its end)
    if (plot(f, in, NULL, img, 0, 0.9, &curves, &charts) < 0 || os_runfiles_record(img) < 0)
        return os_err_ctx("the charts of %s", in);
    os_info("omnishard sft: charts of logging.jsonl written to %s/", img);
    return 0;
}
