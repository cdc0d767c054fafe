// omnishard plot's images/ folder, as ms-swift's: one chart per metric of a logging.jsonl (docs/dataset.md, "Plot").
#pragma once
#include "cli/plot_svg.h"

// 1 for the keys that get a chart: loss terms (loss, text_loss, audio_loss_i, param_loss), accuracies (acc,
// text_acc, audio_acc_i), learning_rate (lr in logs without it), grad_norm, memory(GiB), and the eval_ ones
int os_plot_is_metric(const char *key);
// 1 for the loss terms (loss, text_loss, audio_loss_i, param_loss, and their eval_ forms): the curves smoothed
int os_plot_is_loss(const char *key);
// ms-swift's smoothing of a training curve: s[0] = y[0], s[k] = w s[k-1] + (1 - w) y[k]
void os_plot_smooth(const double *y, int64_t n, double w, double *s);
// DIR/train_KEY.png and DIR/eval_KEY.png (KEY without "eval_"), as ms-swift's images/, and the same charts as .svg
// beside them, each written atomically: a training loss term as its values (light) and their smoothing by `smooth`
// (dark; 0: none), any other training metric (learning_rate, grad_norm, accuracies, memory) as its values alone
// (dark), an evaluation metric as its points joined. Returns the number of charts, or -1 + message naming the file.
int os_plot_images(const os_plot_series *s, int ns, const char *dir, double smooth);
