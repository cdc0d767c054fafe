// Numbers as text: decimal-only parsing of option values and the shortest text that reads back as the same number.
#pragma once
#include <stddef.h>

// s is a decimal number ([+-]digits[.digits][e[+-]digits], nothing before or after; no hex, inf or nan) and finite:
// 0 and *x; -1 otherwise (no message: the caller names the option)
int os_parse_decimal(const char *s, double *x);
// the same for an integer ([+-]digits) within [lo, hi]
int os_parse_decimal_int(const char *s, long long lo, long long hi, long long *x);
// the decimal number at the start of s, ending at *end (one of a comma-separated list): os_parse_decimal's syntax
int os_parse_decimal_prefix(const char *s, const char **end, double *x);
// the shortest %g text that reads back as the same double / float (0.99, not 0.98999999999999999); returns buf
const char *os_double_str(double x, char *buf, size_t n);
const char *os_float_str(float x, char *buf, size_t n);
