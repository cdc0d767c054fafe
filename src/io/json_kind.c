// The kind of a cJSON value in words, and integers read from JSON numbers (see json_kind.h).
#include "io/json_kind.h"
#include <math.h>

const char *os_json_kind(const cJSON *j) {
    if (!j) return "nothing (missing)";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "an invalid value";
}

int os_json_int(const cJSON *j, int64_t lo, int64_t hi, int64_t *out) {
    const double exact = 9007199254740992.0;   // 2^53
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble, l = (double)lo < -exact ? -exact : (double)lo, h = (double)hi > exact ? exact : (double)hi;
    if (!(d >= l && d <= h) || d != floor(d)) return 0;   // NaN fails the first test
    *out = (int64_t)d;
    return 1;
}
