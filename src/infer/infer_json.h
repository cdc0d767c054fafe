// omnishard infer's output: one JSON object per answer on stdout (docs/inference.md "Output").
#pragma once
#include "infer/infer.h"
#include "tokenizer/tokenizer.h"
#include <stdio.h>

typedef struct {
    int show_prompt;          // add prompt_input_ids
    int64_t round;            // multi-round: the round (1-based) and the history its prompt used; 0: single answer
    const char *history;
} os_infer_print_opts;

// the answer's fields of the JSON object, without its braces ("\"text\": ..., \"do_layershift\": ..."), so that a
// caller can add its own; tok NULL: "text" is empty (the caller has said why)
void os_infer_write(FILE *f, const os_tokenizer *tok, const os_model *m, const os_infer_prompt *p,
                    const os_gen_result *r, int text_only, const os_infer_print_opts *o);
// the whole object and a newline on stdout; tok NULL: "text" is empty (the caller has said why)
void os_infer_print(const os_tokenizer *tok, const os_model *m, const os_infer_prompt *p, const os_gen_result *r,
                    int text_only, const os_infer_print_opts *o);
