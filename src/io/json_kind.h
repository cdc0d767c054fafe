// The kind of a cJSON value in words, for "expected X, got Y" messages, and integers read from JSON numbers.
#pragma once
#include <cjson/cJSON.h>
#include <stdint.h>

// "a string", "a number", "a boolean", "null", "an array", "an object"; NULL (absent): "nothing (missing)".
const char *os_json_kind(const cJSON *j);

// 1 with *out set when j is a JSON number with an integral value in [lo, hi], else 0 (not a number, a fraction,
// out of range, or beyond +-2^53, where a double no longer holds every integer). The value is compared as a double
// before it is converted, so any number in a file is safe to test (C leaves the conversion of an out-of-range
// double undefined).
int os_json_int(const cJSON *j, int64_t lo, int64_t hi, int64_t *out);
