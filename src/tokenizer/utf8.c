#include "tokenizer/utf8.h"
#include "core/alloc.h"
#include <string.h>

// Length of the valid sequence at s[i] (1..4), or -(number of bytes that form a maximal invalid subpart, >= 1).
static int seq_len(const unsigned char *s, size_t i, size_t n) {
    unsigned c = s[i];
    if (c < 0x80) return 1;
    int len;
    unsigned lo = 0x80, hi = 0xBF;   // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;        // no overlongs
        if (c == 0xED) hi = 0x9F;        // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;        // no overlongs
        if (c == 0xF4) hi = 0x8F;        // nothing above U+10FFFF
    } else return -1;
    for (int k = 1; k < len; k++) {
        if (i + (size_t)k >= n) return -k;
        unsigned b = s[i + (size_t)k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return -k;
    }
    return len;
}

int64_t os_utf8_invalid_at(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        // ASCII fast path, 8 bytes at a time
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        int l = seq_len(s, i, n);
        if (l < 0) return (int64_t)i;   // the start of the invalid sequence
        i += (size_t)l;
    }
    return -1;
}

char *os_utf8_lossy(const char *str, size_t n, size_t *len) {
    const unsigned char *s = (const unsigned char *)str;
    unsigned char *out = os_alloc(3 * n + 1, "decoded text"), *o = out;   // each bad byte -> at most 3 bytes
    size_t i = 0;
    while (i < n) {
        int l = seq_len(s, i, n);
        if (l > 0) {
            memcpy(o, s + i, (size_t)l);
            o += l;
            i += (size_t)l;
        } else {
            o += os_utf8_put(o, 0xFFFD);
            i += (size_t)-l;
        }
    }
    *o = 0;
    *len = (size_t)(o - out);
    return (char *)out;
}

int os_py_isspace(uint32_t c) {
    if (c <= 0x20) return (c >= 0x09 && c <= 0x0D) || c >= 0x1C;
    if (c < 0x85) return 0;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

void os_utf8_py_strip(const char *str, size_t n, size_t *b, size_t *e) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, at = 0, end = 0;
    int lead = 1;
    while (i < n) {
        size_t start = i;
        uint32_t c = os_utf8_next(s, &i);
        if (os_py_isspace(c)) {
            if (lead) at = i;
        } else {
            if (lead) at = start;
            lead = 0, end = i;
        }
    }
    if (lead) at = end = n;
    *b = at, *e = end;
}
