// JSON string literals for `omnishard tokenize --json`: texts with newlines and NUL bytes, one per line.
#pragma once
#include <stddef.h>
#include <stdio.h>

// The text of the JSON string literal in s[0..n) (whitespace around it allowed): os_alloc'd, NUL-terminated,
// its length in *len (it may hold NULs). NULL with an error message when s is not one JSON string.
char *os_json_string_parse(const char *s, size_t n, size_t *len);
// Write s[0..n) as a JSON string literal (UTF-8 kept as is; quotes, backslashes and control characters escaped).
void os_json_string_write(FILE *f, const char *s, size_t n);
