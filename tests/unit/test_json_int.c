// os_json_int (src/io/json_kind.c): integers read from JSON numbers, including the ones a C cast may not convert
// (beyond int64, infinite, NaN) and the ones a double does not hold exactly (beyond 2^53).
#include "check.h"
#include "io/json_kind.h"
#include <math.h>
#include <stdint.h>

static int got(double x, int64_t lo, int64_t hi, int64_t *out) {
    cJSON *j = cJSON_CreateNumber(x);
    int r = os_json_int(j, lo, hi, out);
    cJSON_Delete(j);
    return r;
}

int main(void) {
    int64_t v = -7;
    CHECK(got(3, 0, 10, &v) == 1 && v == 3, "3 in [0, 10]: %lld", (long long)v);
    CHECK(got(0, 0, 10, &v) == 1 && v == 0 && got(10, 0, 10, &v) == 1 && v == 10, "the bounds are inclusive");
    v = -7;
    CHECK(got(11, 0, 10, &v) == 0 && got(-1, 0, 10, &v) == 0 && v == -7, "out of [lo, hi] leaves *out alone");
    CHECK(got(2.5, 0, 10, &v) == 0 && got(-0.5, -1, 10, &v) == 0, "fractions are not integers");
    CHECK(got(3e121, INT64_MIN, INT64_MAX, &v) == 0 && got(-3e121, INT64_MIN, INT64_MAX, &v) == 0, "beyond int64");
    CHECK(got(9223372036854775808.0, INT64_MIN, INT64_MAX, &v) == 0, "2^63 is not an int64");
    CHECK(got(INFINITY, INT64_MIN, INT64_MAX, &v) == 0 && got(-INFINITY, INT64_MIN, INT64_MAX, &v) == 0, "inf");
    CHECK(got(NAN, INT64_MIN, INT64_MAX, &v) == 0, "NaN");
    CHECK(got(9007199254740992.0, 0, INT64_MAX, &v) == 1 && v == 9007199254740992LL, "2^53 is exact");
    CHECK(got(9007199254740994.0, 0, INT64_MAX, &v) == 0, "beyond 2^53 a double skips integers");
    CHECK(got(-9007199254740992.0, INT64_MIN, 0, &v) == 1 && v == -9007199254740992LL, "-2^53 is exact");
    CHECK(got(2147483648.0, INT32_MIN, INT32_MAX, &v) == 0 && got(-2147483648.0, INT32_MIN, INT32_MAX, &v) == 1,
          "int32 bounds");
    cJSON *s = cJSON_CreateString("3"), *n = cJSON_CreateNull();
    CHECK(os_json_int(s, 0, 10, &v) == 0 && os_json_int(n, 0, 10, &v) == 0 && os_json_int(NULL, 0, 10, &v) == 0,
          "a string, null or nothing is not an integer");
    cJSON_Delete(s), cJSON_Delete(n);
    cJSON *p = cJSON_Parse("[1e999, -1e999, 12, 1.0]");
    const cJSON *e = p->child;
    CHECK(os_json_int(e, INT64_MIN, INT64_MAX, &v) == 0, "1e999 as parsed");
    CHECK(os_json_int(e->next, INT64_MIN, INT64_MAX, &v) == 0, "-1e999 as parsed");
    CHECK(os_json_int(e->next->next, 0, 100, &v) == 1 && v == 12, "12 as parsed");
    CHECK(os_json_int(e->next->next->next, 0, 100, &v) == 1 && v == 1, "1.0 is the integer 1");
    cJSON_Delete(p);
    return check_report("test_json_int");
}
