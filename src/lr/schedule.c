#include "lr/schedule.h"
#include <math.h>
#include <string.h>

double os_lr_at(const char *type, double lr, int64_t s, int64_t W, int64_t S) {
    if (!strcmp(type, "constant")) return lr;
    if (s < W) return lr * (double)s / (double)(W > 1 ? W : 1);
    if (!strcmp(type, "constant_with_warmup")) return lr;
    double span = (double)(S - W > 1 ? S - W : 1);
    if (!strcmp(type, "linear")) return lr * fmax(0.0, (double)(S - s) / span);
    double progress = (double)(s - W) / span;
    return lr * fmax(0.0, 0.5 * (1.0 + cos(M_PI * progress)));
}
