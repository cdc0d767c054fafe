// Encoding: added tokens in the raw text, then for each stretch between them NFC, the pre-tokenizer split
// (PCRE2; every match and every unmatched gap is a piece, as Split "Isolated" does) and BPE of each piece.
#include "core/alloc.h"
#include "core/err.h"
#include "tokenizer/nfc.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"
#include <string.h>

typedef struct {
    os_growbuf ids;
    int64_t nids;
    os_growbuf norm, cps;    // NFC output and scratch
    os_growbuf shadow;       // the text the regex runs on, with stand-ins
    pcre2_match_data *md;
} enc_state;

static int regex_find(const os_tokenizer *t, enc_state *st, const char *s, size_t n, size_t off) {
    int rc = t->re_jit ? pcre2_jit_match(t->re, (PCRE2_SPTR)s, n, off, 0, st->md, NULL) : PCRE2_ERROR_JIT_STACKLIMIT;
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)   // not JIT-compiled, or the JIT stack is too small: interpreter
        rc = pcre2_match(t->re, (PCRE2_SPTR)s, n, off, PCRE2_NO_UTF_CHECK, st->md, NULL);
    if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) return rc;
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    return os_errf("%s: pre-tokenizer regex: matching failed at byte %zu: %s", t->path, off, (char *)msg);
}

// The copy of s[0..n) in which every code point whose category changed since PCRE2's Unicode version is replaced by
// its stand-in (same UTF-8 length: the byte offsets of the matches hold for s); s itself when it has none.
static const char *with_stand_ins(enc_state *st, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned char *out = NULL;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x80) {   // ASCII needs none: skip it 8 bytes at a time
            uint64_t w;
            while (i + 8 <= n && (memcpy(&w, u + i, 8), !(w & 0x8080808080808080ull))) i += 8;
            while (i < n && u[i] < 0x80) i++;
            continue;
        }
        size_t at = i;
        uint32_t r = os_tok_stand_in(os_utf8_next(u, &i));
        if (!r) continue;
        if (!out) {
            out = os_gb_reserve(&st->shadow, n, 0, "regex text");
            memcpy(out, s, n);
        }
        os_utf8_put(out + at, r);
    }
    return out ? (const char *)out : s;
}

// one stretch of text without added tokens
static int encode_text(os_tokenizer *t, enc_state *st, const char *s, size_t n) {
    if (!n) return 0;
    if (t->nfc && !os_nfc_quick_yes(s, n)) {
        n = os_nfc(s, n, &st->norm, &st->cps);
        s = st->norm.p;
    }
    const unsigned char *u = (const unsigned char *)s;
    if (!t->re) {
        os_tok_bpe(t, u, n, &st->ids, &st->nids);
        return 0;
    }
    const char *rs = t->re_stand_ins ? with_stand_ins(st, s, n) : s;   // what the regex sees
    size_t off = 0, gap = 0;   // gap: start of the text not yet given to BPE
    while (off < n) {
        int rc = regex_find(t, st, rs, n, off);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return -1;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
        if (ov[0] > gap) os_tok_bpe(t, u + gap, ov[0] - gap, &st->ids, &st->nids);
        gap = ov[0];
        if (ov[1] == ov[0]) {   // an empty match only splits the gap; go on after the next character
            off = ov[0] + 1;
            while (off < n && (u[off] & 0xC0) == 0x80) off++;
            continue;
        }
        os_tok_bpe(t, u + ov[0], ov[1] - ov[0], &st->ids, &st->nids);
        off = gap = ov[1];
    }
    if (gap < n) os_tok_bpe(t, u + gap, n - gap, &st->ids, &st->nids);
    return 0;
}

static void push_id(enc_state *st, int32_t id) {
    int32_t *p = os_gb_reserve(&st->ids, (size_t)(st->nids + 1) * sizeof(int32_t), (size_t)st->nids * sizeof(int32_t),
                               "token ids");
    p[st->nids++] = id;
}

int os_tok_encode(const os_tokenizer *ctok, const char *s, size_t n, int32_t **ids, int64_t *nids) {
    os_tokenizer *t = (os_tokenizer *)ctok;   // only the cache changes, under its lock
    *ids = NULL;
    *nids = 0;
    int64_t bad = os_utf8_invalid_at(s, n);
    if (bad >= 0) return os_errf("input is not valid UTF-8 at byte %lld", (long long)bad);
    enc_state st = {0};
    if (t->re && !(st.md = pcre2_match_data_create_from_pattern(t->re, NULL)))
        return os_errf("out of memory for the regex match data");
    int rc = 0;
    size_t seg = 0, i = 0;   // seg: start of the current stretch without added tokens
    while (i < n && !rc) {
        unsigned c = (unsigned char)s[i];
        int k = t->added_at[c], end = t->added_at[c + 1];
        for (; k < end; k++)   // longest first
            if ((size_t)t->added[k].len <= n - i && !memcmp(s + i, t->added[k].s, (size_t)t->added[k].len)) break;
        if (k == end) {
            i++;
            continue;
        }
        rc = encode_text(t, &st, s + seg, i - seg);
        push_id(&st, t->added[k].id);
        i += (size_t)t->added[k].len;
        seg = i;
    }
    if (!rc) rc = encode_text(t, &st, s + seg, n - seg);
    pcre2_match_data_free(st.md);
    os_gb_free(&st.norm);
    os_gb_free(&st.cps);
    os_gb_free(&st.shadow);
    if (rc || !st.nids) {
        os_gb_free(&st.ids);
        return rc;
    }
    *ids = st.ids.p;
    *nids = st.nids;
    return 0;
}
