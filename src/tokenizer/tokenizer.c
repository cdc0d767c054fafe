// Tokenizer API besides loading (tok_load.c) and encoding (tok_encode.c): decoding, look-ups, freeing.
#include "tokenizer/tokenizer.h"
#include "core/alloc.h"
#include "core/err.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"
#include <string.h>

int os_tok_vocab_size(const os_tokenizer *t) { return t->n_ids; }

int os_tok_is_special(const os_tokenizer *t, int32_t id) {
    for (int k = 0; k < t->n_added; k++)
        if (t->added[k].id == id) return t->added[k].special;
    return 0;
}

int32_t os_tok_token_id(const os_tokenizer *t, const char *text) {
    return os_tok_strmap_get(&t->names, text, (uint32_t)strlen(text));
}

char *os_tok_decode(const os_tokenizer *t, const int32_t *ids, int64_t n) {
    size_t len;
    return os_tok_decode_n(t, ids, n, &len);
}

char *os_tok_decode_n(const os_tokenizer *t, const int32_t *ids, int64_t n, size_t *len) {
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_ids) {
            os_errf("id %d (at position %lld) is out of range (vocabulary size %d)", ids[i], (long long)i, t->n_ids);
            return NULL;
        }
        if (t->dec_len[ids[i]] < 0) {
            os_errf("id %d (at position %lld) has no token in %s", ids[i], (long long)i, t->path);
            return NULL;
        }
        total += t->dec_len[ids[i]];
    }
    char *raw = os_alloc((size_t)total + 1, "decoded text");
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        memcpy(raw + m, t->text + t->dec_off[ids[i]], (size_t)t->dec_len[ids[i]]);
        m += t->dec_len[ids[i]];
    }
    *len = (size_t)m;
    if (os_utf8_invalid_at(raw, (size_t)m) < 0) return raw;
    char *text = os_utf8_lossy(raw, (size_t)m, len);   // partial characters become U+FFFD
    os_free(raw);
    return text;
}

void os_tok_free(os_tokenizer *t) {
    if (!t) return;
    os_free(t->path);
    os_free(t->text);
    os_free(t->dec_off);
    os_free(t->dec_len);
    os_free(t->names.slots);
    os_free(t->merges.keys);
    os_free(t->merges.vals);
    os_free(t->added);
    pcre2_code_free(t->re);
    os_tok_cache_free(t->cache);
    pthread_mutex_destroy(&t->cache_lock);
    os_free(t);
}
