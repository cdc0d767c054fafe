// The kind of a cJSON value in words, for "expected X, got Y" messages.
#pragma once
#include <cjson/cJSON.h>

// "a string", "a number", "a boolean", "null", "an array", "an object"; NULL (absent): "nothing (missing)".
const char *os_json_kind(const cJSON *j);
