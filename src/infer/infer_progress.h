// A single answer's progress on stderr (docs/inference.md "Progress"): tokens (generation steps), tokens/s and, when
// stderr is a terminal, a bar and the text so far on one line rewritten in place (at most 10 times a second);
// otherwise one line every 5 s. At the end, why generation stopped.
#pragma once
#include "infer/infer.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const os_tokenizer *tok;   // NULL: no text shown
    int64_t max;               // --max_new_tokens
    double t0, shown;
    int tty, live;             // stderr is a terminal; a live line is on it
} os_infer_progress;

void os_infer_progress_start(os_infer_progress *p, const os_tokenizer *tok, int64_t max_new_tokens);
// os_gen_opts.progress: after each step
void os_infer_progress_step(void *ctx, const os_gen_result *so_far);
// the live line cleared, then "stop: REASON ..." (text_only: no audio stream)
void os_infer_progress_end(os_infer_progress *p, const os_gen_result *r, int text_only);
