// The kind of a cJSON value in words (see json_kind.h).
#include "io/json_kind.h"

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
