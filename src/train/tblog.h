// logging.jsonl's lines as TensorBoard scalars (--report_to tensorboard; docs/training.md "TensorBoard"): every
// number of a line under the tag transformers' TensorBoardCallback gives it (rewrite_logs: "eval_X" -> "eval/X",
// any other key K -> "train/K"), at the line's step, as float32; "step" itself and null values (no target in the
// window) are not scalars.
#pragma once
#include "io/tfevents.h"
#include <stddef.h>

// the scalars of one logging.jsonl line (n bytes, no NUL needed); 0, or -1 + message naming the event file
int os_tblog_line(os_tfevents *w, const char *line, size_t n);
// the TensorBoard tag of logging.jsonl key k in buf
void os_tblog_tag(const char *k, char *buf, size_t n);
