// The text side of omnishard infer: generated ids as text, and the conversation history of the multi-round mode.
#pragma once
#include "tokenizer/tokenizer.h"
#include <stddef.h>
#include <stdint.h>

// The text of the ids the tokenizer knows (SLAM-Omni special ids and ids without a token are left out; with
// skip_special also the added tokens marked special, as Hugging Face's decode(skip_special_tokens=True)); os_alloc'd,
// *len bytes (NUL-terminated). NULL + message only when decoding fails.
char *os_infer_text(const os_tokenizer *tok, const int32_t *ids, int64_t n, int skip_special, size_t *len);

// The history after one round, as the reference's multi-round generation writes it
// (generate_s2s_online_multi_round.py:221-240): history + "USER: " + question + " ASSISTANT: " +
// answer.strip() + " ", the question stripped too when strip_question; os_alloc'd.
char *os_infer_history_next(const char *history, const char *question, const char *answer, size_t answer_len,
                            int strip_question);
