// UTF-8 helpers: strict validation (no overlongs, no surrogates, nothing above U+10FFFF), decoding of already
// validated text, encoding, and the lossy conversion that replaces each maximal invalid subpart by U+FFFD.
#pragma once
#include "tokenizer/growbuf.h"
#include <stddef.h>
#include <stdint.h>

// byte offset of the first invalid byte of s[0..n), or -1 when all of it is valid UTF-8
int64_t os_utf8_invalid_at(const char *s, size_t n);
// decode the code point at s[*i] of VALID UTF-8 and advance *i
static inline uint32_t os_utf8_next(const unsigned char *s, size_t *i) {
    uint32_t c = s[*i];
    if (c < 0x80) { *i += 1; return c; }
    if (c < 0xE0) { c = (c & 0x1F) << 6 | (s[*i + 1] & 0x3F); *i += 2; return c; }
    if (c < 0xF0) { c = (c & 0x0F) << 12 | (uint32_t)(s[*i + 1] & 0x3F) << 6 | (s[*i + 2] & 0x3F); *i += 3; return c; }
    c = (c & 0x07) << 18 | (uint32_t)(s[*i + 1] & 0x3F) << 12 | (uint32_t)(s[*i + 2] & 0x3F) << 6 | (s[*i + 3] & 0x3F);
    *i += 4;
    return c;
}
// write code point c at out (room for 4 bytes); returns the number of bytes written
static inline int os_utf8_put(unsigned char *out, uint32_t c) {
    if (c < 0x80) { out[0] = (unsigned char)c; return 1; }
    if (c < 0x800) { out[0] = (unsigned char)(0xC0 | c >> 6); out[1] = (unsigned char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        out[0] = (unsigned char)(0xE0 | c >> 12); out[1] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        out[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | c >> 18); out[1] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
    out[2] = (unsigned char)(0x80 | (c >> 6 & 0x3F)); out[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}
// NUL-terminated copy of s[0..n) in which every maximal invalid subpart is replaced by U+FFFD (os_alloc'd);
// its length in *len
char *os_utf8_lossy(const char *s, size_t n, size_t *len);
// Python's str.isspace() of code point c (the characters str.strip() removes: bidirectional class WS, B or S, or
// Unicode White_Space; U+0009-000D, U+001C-0020, U+0085, U+00A0, U+1680, U+2000-200A, U+2028/9, U+202F, U+205F, U+3000)
int os_py_isspace(uint32_t c);
// Python's s.strip() of VALID UTF-8 s[0..n): the byte range [*b, *e) left after dropping leading and trailing
// os_py_isspace code points
void os_utf8_py_strip(const char *s, size_t n, size_t *b, size_t *e);
