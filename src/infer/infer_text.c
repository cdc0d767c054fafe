// Generated ids as text, and the multi-round history (infer_text.h).
#include "infer/infer_text.h"
#include "core/alloc.h"
#include "tokenizer/utf8.h"
#include <stdio.h>
#include <string.h>

// the ids to decode: known to the tokenizer (decodable one by one when `check`), not special when skip_special
static int64_t keep_ids(const os_tokenizer *tok, const int32_t *ids, int64_t n, int skip_special, int check, int32_t *keep) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] >= os_tok_vocab_size(tok) || (skip_special && os_tok_is_special(tok, ids[i]))) continue;
        char *one = check ? os_tok_decode(tok, ids + i, 1) : NULL;
        if (!check || one) keep[k++] = ids[i];
        os_free(one);
    }
    return k;
}

char *os_infer_text(const os_tokenizer *tok, const int32_t *ids, int64_t n, int skip_special, size_t *len) {
    int32_t *keep = os_alloc(sizeof(int32_t) * (size_t)(n + 1), "text ids");
    int64_t k = keep_ids(tok, ids, n, skip_special, 0, keep);
    char *s = os_tok_decode_n(tok, keep, k, len);
    if (!s) {   // an id inside the vocabulary without a token: decode only the ids that have one
        k = keep_ids(tok, ids, n, skip_special, 1, keep);
        s = os_tok_decode_n(tok, keep, k, len);
    }
    os_free(keep);
    return s;
}

char *os_infer_history_next(const char *history, const char *question, const char *answer, size_t answer_len,
                            int strip_question) {
    size_t qb = 0, qe = strlen(question), ab, ae;
    if (strip_question) os_utf8_py_strip(question, qe, &qb, &qe);
    os_utf8_py_strip(answer, answer_len, &ab, &ae);
    size_t n = strlen(history) + 6 + (qe - qb) + 12 + (ae - ab) + 2;
    char *h = os_alloc(n, "conversation history");
    snprintf(h, n, "%sUSER: %.*s ASSISTANT: %.*s ", history, (int)(qe - qb), question + qb, (int)(ae - ab), answer + ab);
    return h;
}
