// The lines of omnishard infer --output_file (docs/inference.md "A whole test set"): a decoded record's (its key and
// texts, index, line, task, stop, counts, seconds and the fields of a single answer) and a failed record's error line.
#pragma once
#include "dataset/dataset.h"
#include "infer/infer.h"
#include "tokenizer/tokenizer.h"
#include <stddef.h>

// why generation stopped: 0 eot, 1 eoa (the stream that ended last; text first on a tie), 2 max_new_tokens
int os_infer_stop_reason(const os_gen_result *r, int text_only);
extern const char *const OS_INFER_STOPS[3];   // their names
// record i's line in its file (0: the format has none)
int64_t os_infer_record_line_no(os_dataset *ds, int64_t i);
// the output line of record i (malloc'd, *n bytes, ending in a newline); NULL + message
char *os_infer_line(os_dataset *ds, int64_t i, const os_tokenizer *tok, const os_model *m, const os_infer_prompt *p,
                    const os_gen_result *r, int text_only, int show_prompt, double sec, size_t *n);
// the error line of record i: its key, source_text, target_text (null where the record has none or is not JSON),
// index, line and "error": msg (malloc'd, *n bytes); NULL when out of memory
char *os_infer_error_line(os_dataset *ds, int64_t i, const char *msg, size_t *n);
// msg naming record i's FILE:LINE (prefixed unless it does already) into out[cap]
void os_infer_record_message(os_dataset *ds, int64_t i, const char *msg, char *out, size_t cap);
