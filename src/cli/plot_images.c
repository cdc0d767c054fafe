// One chart per metric (cli/plot_images.h).
#include "cli/plot_images.h"
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

static void chart(FILE *o, const os_plot_series *s, double smooth, const char *title) {
    os_plot_frame f = frame_of(s);
    int ev = !strncmp(s->name, "eval_", 5);
    os_plot_begin(o, &f, title);
    os_plot_axes(o, &f, NULL);
    if (ev) {
        os_plot_line(o, &f, s->x, s->y, s->n, EVAL, 2.0, "", s->name);
        for (int64_t k = 0; k < s->n; k++)
            fprintf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", os_plot_px(&f, s->x[k]),
                    os_plot_py(&f, s->y[k]), EVAL);
        return;
    }
    double *sm = os_alloc(sizeof(double) * (size_t)s->n, "smoothed curve");
    os_plot_smooth(s->y, s->n, smooth, sm);
    char name[64];
    snprintf(name, sizeof name, "%s smoothed", s->name);
    os_plot_line(o, &f, s->x, s->y, s->n, RAW, 1.2, "", s->name);
    os_plot_line(o, &f, s->x, sm, s->n, SMOOTH, 2.5, "", name);
    if (s->n == 1)   // one point: a mark, not a line of no length
        fprintf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", os_plot_px(&f, s->x[0]), os_plot_py(&f, sm[0]), SMOOTH);
    fprintf(o, "<text x=\"%.0f\" y=\"24\" text-anchor=\"end\" fill=\"%s\">smoothed %.2f</text>\n", f.L + f.pw, SMOOTH,
            smooth);   // above the plot area
    os_free(sm);
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
        char title[64], path[4400], *text = NULL;
        size_t len = 0;
        snprintf(title, sizeof title, "%s_%s", ev ? "eval" : "train",
                 !strcmp(s[i].name, "lr") ? "learning_rate" : ev ? s[i].name + 5 : s[i].name);
        snprintf(path, sizeof path, "%s/%s.svg", dir, title);
        FILE *o = open_memstream(&text, &len);
        if (!o) return os_errf("%s: cannot format the chart: %m", path);
        chart(o, &s[i], smooth, title);
        fprintf(o, "</svg>\n");
        int bad = ferror(o) | (fclose(o) != 0);
        int rc = bad ? os_errf("%s: cannot format the chart", path) : os_write_file_atomic(path, text, len);
        free(text);
        if (rc < 0) return -1;
        written++;
    }
    return written;
}
