// omnishard plot: the loss curves of a logging.jsonl (total, text, each audio layer, evaluation) as an SVG file.
#include "cli/commands.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/opts.h"
#include "io/atomic.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: omnishard plot LOGGING_JSONL [-o OUT.svg] [--log]\n"
    "  draws loss, text_loss, audio_loss_0.. and eval_loss (and eval_text_loss, ..) against the step\n";

#define MAXS 24
typedef struct {
    char name[40];
    double *x, *y;
    int64_t n, cap;
} series;

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

static void add(series *s, double x, double y) {
    if (s->n == s->cap) {
        int64_t c = s->cap ? 2 * s->cap : 256;
        double *nx = os_alloc(sizeof(double) * (size_t)c, "plot"), *ny = os_alloc(sizeof(double) * (size_t)c, "plot");
        if (s->n) memcpy(nx, s->x, sizeof(double) * (size_t)s->n), memcpy(ny, s->y, sizeof(double) * (size_t)s->n);
        os_free(s->x), os_free(s->y);
        s->x = nx, s->y = ny, s->cap = c;
    }
    s->x[s->n] = x, s->y[s->n++] = y;
}

// which keys are loss curves: loss, text_loss, audio_loss_N, eval_loss, eval_text_loss, eval_audio_loss_N
static int is_curve(const char *k) {
    const char *b = !strncmp(k, "eval_", 5) ? k + 5 : k;
    return !strcmp(b, "loss") || !strcmp(b, "text_loss") || !strncmp(b, "audio_loss_", 11);
}

static int read_log(const char *path, series *s, int *ns) {
    FILE *f = os_fopen_read(path, "a logging.jsonl");
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
            if (!v->string || !is_curve(v->string) || !cJSON_IsNumber(v) || !isfinite(v->valuedouble)) continue;
            series *c = find(s, ns, v->string);
            if (c) add(c, st->valuedouble, v->valuedouble);
        }
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    if (rc == 0 && *ns == 0) rc = os_errf("%s: no loss values to plot", path);
    return rc;
}

// a "nice" tick spacing (1, 2 or 5 times a power of ten) giving about n ticks over [lo, hi]
static double tick_step(double lo, double hi, int n) {
    double raw = (hi - lo) / n, p = pow(10.0, floor(log10(raw))), r = raw / p;
    return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * p;
}

static void write_svg(FILE *o, series *s, int ns, int logy, const char *title) {
    const double W = 900, H = 520, L = 70, R = 200, T = 40, B = 50, pw = W - L - R, ph = H - T - B;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int i = 0; i < ns; i++)
        for (int64_t k = 0; k < s[i].n; k++) {
            double y = logy ? log10(fmax(s[i].y[k], 1e-12)) : s[i].y[k];
            x0 = fmin(x0, s[i].x[k]), x1 = fmax(x1, s[i].x[k]), y0 = fmin(y0, y), y1 = fmax(y1, y);
        }
    if (!logy && y0 > 0 && y0 < 0.25 * y1) y0 = 0;
    if (x1 <= x0) x0 -= 1, x1 += 1;
    if (y1 <= y0) y0 -= 0.5, y1 += 0.5;
    double pad = 0.04 * (y1 - y0);
    y0 -= pad, y1 += pad;
#define PX(x) (L + ((x) - x0) / (x1 - x0) * pw)
#define PY(y) (T + ph - ((y) - y0) / (y1 - y0) * ph)
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, H, W, H);
    fprintf(o, "<text x=\"%.0f\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">", L + pw / 2);
    for (const char *c = title; *c; c++) {   // escape the log's path
        if (*c == '<') fputs("&lt;", o);
        else if (*c == '>') fputs("&gt;", o);
        else if (*c == '&') fputs("&amp;", o);
        else fputc(*c, o);
    }
    fprintf(o, "</text>\n");
    double dx = tick_step(x0, x1, 8), dy = tick_step(y0, y1, 6);
    for (double t = ceil(x0 / dx) * dx; t <= x1 + 1e-9 * dx; t += dx)
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/><text x=\"%.1f\" y=\"%.1f\" "
                   "text-anchor=\"middle\">%g</text>\n", PX(t), T, PX(t), T + ph, PX(t), T + ph + 16, t);
    for (double t = ceil(y0 / dy) * dy; t <= y1 + 1e-9 * dy; t += dy)
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/><text x=\"%.1f\" y=\"%.1f\" "
                   "text-anchor=\"end\">%.4g</text>\n", L, PY(t), L + pw, PY(t), L - 6, PY(t) + 4, logy ? pow(10.0, t) : t);
    fprintf(o, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#333\"/>\n", L, T, pw, ph);
    fprintf(o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step</text>\n", L + pw / 2, H - 10);
    fprintf(o, "<text transform=\"translate(18 %.0f) rotate(-90)\" text-anchor=\"middle\">loss%s</text>\n", T + ph / 2,
            logy ? " (log scale)" : "");
    for (int i = 0; i < ns; i++) {
        const char *col = COLORS[i % 10];
        int ev = !strncmp(s[i].name, "eval_", 5);
        fprintf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"", col,
                !strcmp(s[i].name, "loss") || !strcmp(s[i].name, "eval_loss") ? "2.2" : "1.3", ev ? " stroke-dasharray=\"6 3\"" : "");
        for (int64_t k = 0; k < s[i].n; k++)
            fprintf(o, "%s%.1f,%.1f", k ? " " : "", PX(s[i].x[k]), PY(logy ? log10(fmax(s[i].y[k], 1e-12)) : s[i].y[k]));
        fprintf(o, "\"><title>%s</title></polyline>\n", s[i].name);
        for (int64_t k = 0; ev && k < s[i].n; k++)
            fprintf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", PX(s[i].x[k]),
                    PY(logy ? log10(fmax(s[i].y[k], 1e-12)) : s[i].y[k]), col);
        double ly = T + 10 + 18 * i;
        fprintf(o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"%s/>"
                   "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", L + pw + 14, ly, L + pw + 40, ly, col,
                ev ? " stroke-dasharray=\"6 3\"" : "", L + pw + 46, ly + 4, s[i].name);
    }
    fprintf(o, "</svg>\n");
#undef PX
#undef PY
}

typedef struct {
    const char *output;
    int log;
} plot_args;

static const os_opt OPTS[] = {
    {.name = "output", .alias = "-o", .type = OS_OPT_STR, .off = offsetof(plot_args, output),
     .help = "the SVG file to write (default: loss.svg next to the log)"},
    {.name = "log", .type = OS_OPT_FLAG, .off = offsetof(plot_args, log), .help = "logarithmic loss axis"},
};

int cmd_plot(int argc, char **argv) {
    plot_args a = {0};
    const char *in = NULL;
    const os_opt_group g = {"options", OPTS, (int)(sizeof OPTS / sizeof OPTS[0]), &a};
    const os_opt_cmd c = {.command = "plot", .usage = USAGE, .groups = &g, .ngroups = 1, .positional = "LOGGING_JSONL",
                          .pos = &in};
    int rc = os_opts_parse(&c, argc, argv);
    if (rc == 1) return os_opts_usage(&c, stdout), 0;
    if (rc == 0 && !in) rc = os_errf("give the logging.jsonl to draw");
    if (rc < 0) return fprintf(stderr, "omnishard plot: %s\n", os_errmsg()), os_opts_usage(&c, stderr), 2;
    const char *out = a.output;
    int logy = a.log;
    char def[4200];
    if (!out) {
        const char *slash = strrchr(in, '/');
        snprintf(def, sizeof def, "%.*sloss.svg", slash ? (int)(slash - in + 1) : 0, in);
        out = def;
    }
    series s[MAXS];
    int ns = 0;
    rc = read_log(in, s, &ns);
    FILE *o = rc == 0 ? fopen(out, "w") : NULL;
    if (rc == 0 && !o) rc = os_errf("%s: cannot write: %m", out);
    if (rc == 0) {
        write_svg(o, s, ns, logy, in);
        int bad = ferror(o);   // a failed write earlier than the last flush
        if (fclose(o) != 0 || bad) {
            rc = os_errf("%s: write failed: %m", out);
            unlink(out);   // no half-written picture
        }
    }
    for (int i = 0; i < ns; i++) os_free(s[i].x), os_free(s[i].y);
    if (rc < 0) {
        fprintf(stderr, "omnishard plot: %s\n", os_errmsg());
        return 1;
    }
    fprintf(stderr, "omnishard plot: %d curves -> %s\n", ns, out);
    return 0;
}
