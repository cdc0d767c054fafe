// Unicode NFC normalisation (canonical decomposition, canonical ordering, canonical composition) of valid UTF-8,
// with the tables of nfc_table.c (Unicode version in os_nfc_unicode_version).
#pragma once
#include "tokenizer/growbuf.h"
#include <stddef.h>
#include <stdint.h>

// 1 when s[0..n) (valid UTF-8) is certainly NFC already (no character that NFC could change or reorder)
int os_nfc_quick_yes(const char *s, size_t n);
// NFC of valid UTF-8 s[0..n) written into out (grown as needed; cps is scratch); returns its length in bytes
size_t os_nfc(const char *s, size_t n, os_growbuf *out, os_growbuf *cps);
// canonical combining class of a code point
int os_nfc_ccc(uint32_t c);
