// Learning-rate schedules with the semantics of transformers' get_scheduler: the optimizer step with index s
// (0-based: the first step uses s = 0) runs at lr * f(s), W warm-up steps, S total steps:
//   warm-up (s < W): s / W;  then constant: 1;  linear: (S - s) / (S - W);  cosine: 0.5 (1 + cos(pi (s-W)/(S-W)))
// ("constant" has no warm-up).
#pragma once
#include <stdint.h>
double os_lr_at(const char *type, double lr, int64_t s, int64_t warmup, int64_t total);
