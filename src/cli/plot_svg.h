// SVG charts of logging.jsonl series for omnishard plot: the series, a chart's frame (the plot area and the data
// range it shows), its axes (integer step ticks) and lines. Geometry in docs/dataset.md, "Plot".
#pragma once
#include <stdint.h>
#include <stdio.h>

typedef struct {
    char name[40];   // the logging.jsonl key
    double *x, *y;   // step, value [n]
    int64_t n, cap;
} os_plot_series;

// append (step, value)
void os_plot_add(os_plot_series *s, double x, double y);

typedef struct {
    double W, H, L, T, pw, ph;   // picture size, plot area's left and top edge, width and height (pixels)
    double x0, x1, y0, y1;       // the data range the plot area shows (y in axis units: log10 when logy)
    int logy;
} os_plot_frame;

double os_plot_px(const os_plot_frame *f, double x);
double os_plot_py(const os_plot_frame *f, double y);   // y in axis units
// <svg>, a white background and the title (escaped)
void os_plot_begin(FILE *o, const os_plot_frame *f, const char *title);
// the ticks of the x axis (y_axis 0: whole steps, 1, 2 or 5 times a power of ten apart, about 8) or the y axis (about
// 6; values in axis units, labels as shown: 10^v on a log axis): at most max into t and label; their count
int os_plot_ticks(const os_plot_frame *f, int y_axis, double *t, char (*label)[24], int max);
// grid lines and tick labels (x: whole steps, 1, 2 or 5 times a power of ten apart), the plot area's box, "step"
// under it and ylabel beside it (NULL: none; the per-metric charts' titles name the metric)
void os_plot_axes(FILE *o, const os_plot_frame *f, const char *ylabel);
// a polyline through (x[k], y[k]) (y in axis units) with the series name as its <title>; attrs is added to it
void os_plot_line(FILE *o, const os_plot_frame *f, const double *x, const double *y, int64_t n, const char *color,
                  double width, const char *attrs, const char *name);
// text with <, >, & escaped
void os_plot_text(FILE *o, const char *s);
