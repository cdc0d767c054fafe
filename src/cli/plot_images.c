// One chart per metric (cli/plot_images.h).
#include "cli/plot_images.h"
#include "cli/plot_png.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/atomic.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RAW "#aec7e8"      // a training metric's values
#define SMOOTH "#1f77b4"   // their smoothing
#define EVAL "#d62728"     // an evaluation metric

int os_plot_is_metric(const char *k) {
    const char *b = !strncmp(k, "eval_", 5) ? k + 5 : k;
    static const char *const plain[] = {"loss", "text_loss", "param_loss", "acc", "text_acc", "learning_rate", "lr",
                                        "grad_norm", "memory(GiB)"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(b, plain[i])) return 1;
    return !strncmp(b, "audio_loss_", 11) || !strncmp(b, "audio_acc_", 10);
}

int os_plot_is_loss(const char *k) {
    const char *b = !strncmp(k, "eval_", 5) ? k + 5 : k;
    return !strcmp(b, "loss") || !strcmp(b, "text_loss") || !strcmp(b, "param_loss") || !strncmp(b, "audio_loss_", 11);
}

void os_plot_smooth(const double *y, int64_t n, double w, double *s) {
    for (int64_t k = 0; k < n; k++) s[k] = k ? w * s[k - 1] + (1.0 - w) * y[k] : y[0];
}

// the frame of one metric: x from the first to the last step, y the values' range with 5% of it added each side
static os_plot_frame frame_of(const os_plot_series *s) {
    os_plot_frame f = {.W = 640, .H = 400, .L = 70, .T = 40, .pw = 550, .ph = 310};
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t k = 0; k < s->n; k++) lo = fmin(lo, s->y[k]), hi = fmax(hi, s->y[k]);
    f.x0 = s->x[0], f.x1 = s->x[s->n - 1];
    if (f.x1 <= f.x0) f.x0 -= 1, f.x1 += 1;
    double span = hi > lo ? hi - lo : fabs(lo) > 0 ? 0.1 * fabs(lo) : 1.0;
    f.y0 = lo - 0.05 * span, f.y1 = hi + 0.05 * span;
    return f;
}

// what a chart shows: an evaluation metric's points joined; a training loss as its values (light) and their
// smoothing (dark); any other training metric (learning_rate, grad_norm, accuracies, memory) as its values (dark)
typedef struct {
    os_plot_frame f;
    int ev, smoothed;
    double *sm;   // the smoothed values (smoothed)
} chart_plan;

static chart_plan plan(const os_plot_series *s, double smooth) {
    chart_plan c = {.f = frame_of(s), .ev = !strncmp(s->name, "eval_", 5)};
    c.smoothed = !c.ev && os_plot_is_loss(s->name) && smooth > 0;
    if (c.smoothed) {
        c.sm = os_alloc(sizeof(double) * (size_t)s->n, "smoothed curve");
        os_plot_smooth(s->y, s->n, smooth, c.sm);
    }
    return c;
}

static void chart(FILE *o, const os_plot_series *s, const chart_plan *c, double smooth, const char *title) {
    const os_plot_frame *f = &c->f;
    os_plot_begin(o, f, title);
    os_plot_axes(o, f, NULL);
    os_plot_line(o, f, s->x, s->y, s->n, c->ev ? EVAL : c->smoothed ? RAW : SMOOTH, c->ev ? 2.0 : c->smoothed ? 1.2 : 2.0,
                 "", s->name);
    char name[64];
    snprintf(name, sizeof name, "%s smoothed", s->name);
    if (c->smoothed) os_plot_line(o, f, s->x, c->sm, s->n, SMOOTH, 2.5, "", name);
    const double *y = c->smoothed ? c->sm : s->y;
    for (int64_t k = 0; k < s->n; k++)   // evaluation points; one point: a mark, not a line of no length
        if (c->ev || s->n == 1)
            fprintf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", os_plot_px(f, s->x[k]),
                    os_plot_py(f, y[k]), c->ev ? EVAL : SMOOTH);
    if (c->smoothed)   // above the plot area
        fprintf(o, "<text x=\"%.0f\" y=\"24\" text-anchor=\"end\" fill=\"%s\">smoothed %.2f</text>\n", f->L + f->pw,
                SMOOTH, smooth);
}

// the same chart as pixels
static void chart_png(os_canvas *cv, const os_plot_series *s, const chart_plan *c, double smooth, const char *title) {
    const os_plot_frame *f = &c->f;
    double t[64];
    char label[64][24];
    os_canvas_text(cv, f->L + f->pw / 2, 24, title, 0, OS_PX_TEXT);
    for (int k = 0, n = os_plot_ticks(f, 0, t, label, 64); k < n; k++) {
        os_canvas_line(cv, os_plot_px(f, t[k]), f->T, os_plot_px(f, t[k]), f->T + f->ph, 1, OS_PX_GRID);
        os_canvas_text(cv, os_plot_px(f, t[k]), f->T + f->ph + 16, label[k], 0, OS_PX_TEXT);
    }
    for (int k = 0, n = os_plot_ticks(f, 1, t, label, 64); k < n; k++) {
        os_canvas_line(cv, f->L, os_plot_py(f, t[k]), f->L + f->pw, os_plot_py(f, t[k]), 1, OS_PX_GRID);
        os_canvas_text(cv, f->L - 6, os_plot_py(f, t[k]) + 4, label[k], 1, OS_PX_TEXT);
    }
    os_canvas_box(cv, f->L, f->T, f->pw, f->ph, OS_PX_FRAME);
    os_canvas_text(cv, f->L + f->pw / 2, f->H - 10, "step", 0, OS_PX_TEXT);
    int col = c->ev ? OS_PX_EVAL : c->smoothed ? OS_PX_RAW : OS_PX_SMOOTH;
    for (int64_t k = 1; k < s->n; k++)
        os_canvas_line(cv, os_plot_px(f, s->x[k - 1]), os_plot_py(f, s->y[k - 1]), os_plot_px(f, s->x[k]),
                       os_plot_py(f, s->y[k]), c->smoothed ? 1.2 : 2.0, col);
    for (int64_t k = 1; c->smoothed && k < s->n; k++)
        os_canvas_line(cv, os_plot_px(f, s->x[k - 1]), os_plot_py(f, c->sm[k - 1]), os_plot_px(f, s->x[k]),
                       os_plot_py(f, c->sm[k]), 2.5, OS_PX_SMOOTH);
    const double *y = c->smoothed ? c->sm : s->y;
    for (int64_t k = 0; k < s->n; k++)
        if (c->ev || s->n == 1) os_canvas_disc(cv, os_plot_px(f, s->x[k]), os_plot_py(f, y[k]), 3.5, c->ev ? OS_PX_EVAL : OS_PX_SMOOTH);
    char note[32];
    snprintf(note, sizeof note, "smoothed %.2f", smooth);
    if (c->smoothed) os_canvas_text(cv, f->L + f->pw, 24, note, 1, OS_PX_SMOOTH);
}

// DIR/TITLE.svg and DIR/TITLE.png of one series; 0 or -1 + message
static int write_chart(const os_plot_series *s, const char *dir, const char *title, double smooth) {
    chart_plan c = plan(s, smooth);
    char path[4400], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s.svg", dir, title);
    FILE *o = open_memstream(&text, &len);
    int rc = o ? 0 : os_errf("%s: cannot format the chart: %m", path);
    if (o) {
        chart(o, s, &c, smooth, title);
        fprintf(o, "</svg>\n");
        int bad = ferror(o) | (fclose(o) != 0);
        rc = bad ? os_errf("%s: cannot format the chart", path) : os_write_file_atomic(path, text, len);
        free(text);
    }
    os_canvas cv;
    os_canvas_init(&cv, (int)c.f.W, (int)c.f.H);
    chart_png(&cv, s, &c, smooth, title);
    snprintf(path, sizeof path, "%s/%s.png", dir, title);
    if (rc == 0) rc = os_canvas_write_png(&cv, path);
    os_canvas_free(&cv);
    os_free(c.sm);
    return rc;
}

static int has(const os_plot_series *s, int ns, const char *name) {
    for (int i = 0; i < ns; i++)
        if (!strcmp(s[i].name, name)) return 1;
    return 0;
}

int os_plot_images(const os_plot_series *s, int ns, const char *dir, double smooth) {
    if (os_mkdir_p(dir) < 0) return -1;
    int written = 0;
    for (int i = 0; i < ns; i++) {
        if (!os_plot_is_metric(s[i].name) || !s[i].n) continue;
        int ev = !strncmp(s[i].name, "eval_", 5);
        if (!strcmp(s[i].name, "lr") && has(s, ns, "learning_rate")) continue;   // the same values
        char title[64];
        snprintf(title, sizeof title, "%s_%s", ev ? "eval" : "train",
                 !strcmp(s[i].name, "lr") ? "learning_rate" : ev ? s[i].name + 5 : s[i].name);
        if (write_chart(&s[i], dir, title, smooth) < 0) return -1;
        written++;
    }
    return written;
}
