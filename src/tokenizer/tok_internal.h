// Internals of the tokenizer shared by tokenizer.c (API, decode), tok_load.c (tokenizer.json), tok_encode.c
// (added tokens, NFC, pre-tokenizer) and tok_bpe.c (BPE with a cache). Not part of the public API.
#pragma once
#include "tokenizer/gc_table.h"
#include "tokenizer/growbuf.h"
#include "tokenizer/tokenizer.h"
#include <pthread.h>
#include <stdint.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

// 64-bit hash of a byte string
static inline uint64_t os_tok_hash(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ (w * 0xFF51AFD7ED558CCDull)) * 0xC4CEB9FE1A85EC53ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ (w * 0xFF51AFD7ED558CCDull)) * 0xC4CEB9FE1A85EC53ull;
    return h ^ h >> 32;
}

// string -> id, open addressing (an empty slot has s == NULL)
typedef struct {
    const char *s;
    uint32_t len;
    int32_t id;
} os_tok_strslot;
typedef struct {
    os_tok_strslot *slots;
    uint64_t mask;
} os_tok_strmap;
void os_tok_strmap_init(os_tok_strmap *m, int64_t n_max);
// insert or replace; s must outlive the map
void os_tok_strmap_put(os_tok_strmap *m, const char *s, uint32_t len, int32_t id);
int32_t os_tok_strmap_get(const os_tok_strmap *m, const char *s, uint32_t len);   // -1 if absent

// (left id, right id) -> (merge rank, merged id), open addressing (an empty slot has key ~0)
typedef struct {
    uint64_t *keys;
    uint64_t *vals;   // rank << 32 | merged id
    uint64_t mask;
} os_tok_pairmap;
void os_tok_pairmap_init(os_tok_pairmap *m, int64_t n_max);
// insert or replace (a later merge of the same pair wins, as in Hugging Face tokenizers); 1 if it was there
int os_tok_pairmap_put(os_tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id);
static inline int os_tok_pairmap_get(const os_tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *id) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & m->mask;
    for (;; i = (i + 1) & m->mask) {
        if (m->keys[i] == key) {
            *rank = (int32_t)(m->vals[i] >> 32);
            *id = (int32_t)(uint32_t)m->vals[i];
            return 1;
        }
        if (m->keys[i] == ~0ull) return 0;
    }
}

typedef struct {
    const char *s;
    int32_t len, id;
    int special;              // "special": true (Hugging Face's decode skips it with skip_special_tokens)
} os_tok_added;

typedef struct os_tok_cache os_tok_cache;   // piece bytes -> ids (tok_bpe.c)

struct os_tokenizer {
    char *path;
    int32_t n_ids;            // 1 + largest id
    char *text;               // arena: token texts as written in the file, then decoded bytes
    int64_t *dec_off;         // [n_ids] offset in text of the bytes that id decodes to
    int32_t *dec_len;         // [n_ids] their length, -1 when the id has no token
    os_tok_strmap names;      // token text (vocab and added tokens) -> id
    int32_t byte_id[256];     // id of the byte-level token of each byte, -1 if the vocabulary lacks it
    os_tok_pairmap merges;
    int n_added;
    os_tok_added *added;      // sorted by first byte, then longest first
    int32_t added_at[257];    // added[added_at[b] .. added_at[b+1]) start with byte b
    pcre2_code *re;           // pre-tokenizer split regex, NULL for none
    int re_jit;               // 1 when re is JIT-compiled
    int re_stand_ins;         // 1 when re must run on text with stand-ins (os_tok_regex_to_pcre2)
    int nfc;                  // normaliser is NFC (else none)
    os_tok_cache *cache;
    pthread_mutex_t cache_lock;   // taken with trylock: a busy cache is skipped, never waited for
};

// The pre-tokenizer regex of tokenizer.json (Oniguruma syntax) rewritten for PCRE2 (tok_regex.c), os_alloc'd: \s
// as White_Space, and the General_Category properties (\p{L}, \p{N}, ...) either as explicit Unicode 16 ranges or,
// when *stand_ins is set on return, kept: then the regex must run on os_tok_stand_ins' copy of the text.
char *os_tok_regex_to_pcre2(const char *oniguruma_pattern, int *stand_ins);
// the stand-in of code point c (same UTF-8 length, PCRE2 gives it c's current category), 0 when c needs none
uint32_t os_tok_stand_in_search(uint32_t c);
static inline uint32_t os_tok_stand_in(uint32_t c) {
    return os_gc_changed_blocks[c >> 11] >> (c >> 8 & 7) & 1 ? os_tok_stand_in_search(c) : 0;
}

// The GPT-2 byte-level map: the character that stands for byte b (printable Latin-1 bytes stand for themselves,
// the others for U+0100 upwards in byte order).
uint32_t os_tok_byte_char(int b);

// BPE of one pre-tokenized piece (raw bytes): appends its ids to ids (holding *nids ids, grown as needed)
void os_tok_bpe(os_tokenizer *tok, const unsigned char *piece, size_t n, os_growbuf *ids, int64_t *nids);
os_tok_cache *os_tok_cache_new(void);
void os_tok_cache_free(os_tok_cache *c);
