// The Qwen2 byte-level BPE tokenizer, loaded from a Hugging Face tokenizer.json (docs/tokenizer.md).
// Encoding: added tokens are matched first in the raw text (leftmost, longest match first); every stretch between
// them is NFC-normalised, split by the pre-tokenizer regex (PCRE2), mapped byte-level, and merged by BPE in merge
// rank order. Nothing else is added (no BOS/EOS). Encoding and decoding may run concurrently on one tokenizer.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct os_tokenizer os_tokenizer;

// Load a tokenizer.json (a directory means DIR/tokenizer.json, as in a model directory). NULL on error, with an
// os_errf message naming the file and the field.
os_tokenizer *os_tok_load(const char *file_or_dir);
void os_tok_free(os_tokenizer *tok);   // NULL is fine
// the test hook OMNISHARD_TOK_RANGES (main sets it once at start, before any tokenizer loads): 1, the Unicode
// classes of the pre-tokenizer's pattern always as explicit ranges (tok_regex.c)
void os_tok_force_ranges(int on);

// Encode utf8[0..n) (it may contain NULs). On success *ids is an os_alloc'd array of *nids ids (free it with
// os_free; NULL when *nids is 0) and 0 is returned; on error (e.g. "input is not valid UTF-8 at byte N") -1.
int os_tok_encode(const os_tokenizer *tok, const char *utf8, size_t n, int32_t **ids, int64_t *nids);
// Decode ids to a NUL-terminated os_alloc'd UTF-8 string (byte sequences that are not valid UTF-8 become
// U+FFFD, special tokens are kept). NULL with an error message when an id has no token.
char *os_tok_decode(const os_tokenizer *tok, const int32_t *ids, int64_t n);
// The same, with the length of the text in *len (the text may contain NUL bytes).
char *os_tok_decode_n(const os_tokenizer *tok, const int32_t *ids, int64_t n, size_t *len);

// 1 when id is an added token marked "special": true (Hugging Face's decode(skip_special_tokens=True) drops it)
int os_tok_is_special(const os_tokenizer *tok, int32_t id);
// Number of ids: 1 + the largest id of the vocabulary and the added tokens (151665 for Qwen2.5).
int os_tok_vocab_size(const os_tokenizer *tok);
// Id of a token given as written in tokenizer.json (byte-level form, e.g. "Ġworld", or an added token like
// "<|endoftext|>"); -1 when there is none.
int32_t os_tok_token_id(const os_tokenizer *tok, const char *token_text);
