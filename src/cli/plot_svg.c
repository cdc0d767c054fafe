// SVG chart pieces (cli/plot_svg.h).
#include "cli/plot_svg.h"
#include "core/alloc.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

void os_plot_add(os_plot_series *s, double x, double y) {
    if (s->n == s->cap) {
        int64_t c = s->cap ? 2 * s->cap : 256;
        double *nx = os_alloc(sizeof(double) * (size_t)c, "plot"), *ny = os_alloc(sizeof(double) * (size_t)c, "plot");
        if (s->n) memcpy(nx, s->x, sizeof(double) * (size_t)s->n), memcpy(ny, s->y, sizeof(double) * (size_t)s->n);
        os_free(s->x), os_free(s->y);
        s->x = nx, s->y = ny, s->cap = c;
    }
    s->x[s->n] = x, s->y[s->n++] = y;
}

double os_plot_px(const os_plot_frame *f, double x) { return f->L + (x - f->x0) / (f->x1 - f->x0) * f->pw; }
double os_plot_py(const os_plot_frame *f, double y) { return f->T + f->ph - (y - f->y0) / (f->y1 - f->y0) * f->ph; }

void os_plot_text(FILE *o, const char *s) {
    for (const char *c = s; *c; c++) {
        if (*c == '<') fputs("&lt;", o);
        else if (*c == '>') fputs("&gt;", o);
        else if (*c == '&') fputs("&amp;", o);
        else fputc(*c, o);
    }
}

void os_plot_begin(FILE *o, const os_plot_frame *f, const char *title) {
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            f->W, f->H, f->W, f->H);
    fprintf(o, "<text x=\"%.0f\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">", f->L + f->pw / 2);
    os_plot_text(o, title);
    fprintf(o, "</text>\n");
}

// a "nice" tick spacing (1, 2 or 5 times a power of ten) giving about n ticks over [lo, hi]
static double tick_step(double lo, double hi, int n) {
    double raw = (hi - lo) / n, p = pow(10.0, floor(log10(raw))), r = raw / p;
    return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * p;
}

int os_plot_ticks(const os_plot_frame *f, int y_axis, double *t, char (*label)[24], int max) {
    double lo = y_axis ? f->y0 : f->x0, hi = y_axis ? f->y1 : f->x1;
    double d = y_axis ? tick_step(lo, hi, 6) : fmax(1.0, tick_step(lo, hi, 8));   // steps are whole numbers
    int n = 0;
    for (double v = ceil(lo / d) * d; v <= hi + 1e-9 * d && n < max; v += d, n++) {
        t[n] = v;
        if (!y_axis) snprintf(label[n], sizeof label[n], "%.0f", v);
        else snprintf(label[n], sizeof label[n], "%.4g", f->logy ? pow(10.0, v) : fabs(v) < 1e-12 * d ? 0.0 : v);
    }
    return n;
}

void os_plot_axes(FILE *o, const os_plot_frame *f, const char *ylabel) {
    double T = f->T, L = f->L, ph = f->ph, pw = f->pw, t[64];
    char label[64][24];
    for (int k = 0, n = os_plot_ticks(f, 0, t, label, 64); k < n; k++)
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/><text x=\"%.1f\" y=\"%.1f\" "
                   "text-anchor=\"middle\">%s</text>\n", os_plot_px(f, t[k]), T, os_plot_px(f, t[k]), T + ph,
                os_plot_px(f, t[k]), T + ph + 16, label[k]);
    for (int k = 0, n = os_plot_ticks(f, 1, t, label, 64); k < n; k++)
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/><text x=\"%.1f\" y=\"%.1f\" "
                   "text-anchor=\"end\">%s</text>\n", L, os_plot_py(f, t[k]), L + pw, os_plot_py(f, t[k]), L - 6,
                os_plot_py(f, t[k]) + 4, label[k]);
    fprintf(o, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#333\"/>\n", L, T, pw, ph);
    fprintf(o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step</text>\n", L + pw / 2, f->H - 10);
    if (!ylabel) return;
    fprintf(o, "<text transform=\"translate(18 %.0f) rotate(-90)\" text-anchor=\"middle\">", T + ph / 2);
    os_plot_text(o, ylabel);
    fprintf(o, "%s</text>\n", f->logy ? " (log scale)" : "");
}

void os_plot_line(FILE *o, const os_plot_frame *f, const double *x, const double *y, int64_t n, const char *color,
                  double width, const char *attrs, const char *name) {
    fprintf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s points=\"", color, width, attrs);
    for (int64_t k = 0; k < n; k++) fprintf(o, "%s%.1f,%.1f", k ? " " : "", os_plot_px(f, x[k]), os_plot_py(f, y[k]));
    fprintf(o, "\"><title>");
    os_plot_text(o, name);
    fprintf(o, "</title></polyline>\n");
}
