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
// buf (malloc'd, *n bytes, from open_memstream) as valid UTF-8: returned as it is, or freed and replaced by a malloc'd
// copy in which each invalid byte sequence is U+FFFD (a record's field with invalid UTF-8 copied into a line), *n
// updated. Every line omnishard infer writes goes through it, so that each parses as UTF-8 JSON.
char *os_infer_valid_utf8(char *buf, size_t *n);
