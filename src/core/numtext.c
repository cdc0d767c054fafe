#include "core/numtext.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t digits(const char *s) { return strspn(s, "0123456789"); }

// length of the decimal number at s (0: none)
static size_t decimal_len(const char *s) {
    size_t k = (*s == '+' || *s == '-'), d = digits(s + k);
    k += d;
    if (s[k] == '.') {
        size_t f = digits(s + k + 1);
        if (!d && !f) return 0;
        k += 1 + f;
    } else if (!d)
        return 0;
    if (s[k] == 'e' || s[k] == 'E') {
        size_t j = k + 1 + (s[k + 1] == '+' || s[k + 1] == '-'), e = digits(s + j);
        if (e) k = j + e;
    }
    return k;
}

int os_parse_decimal_prefix(const char *s, const char **end, double *x) {
    size_t k = decimal_len(s);
    if (!k) return -1;
    char buf[64];
    if (k >= sizeof buf) return -1;
    memcpy(buf, s, k), buf[k] = 0;
    errno = 0;
    *x = strtod(buf, NULL);
    *end = s + k;
    return errno || !isfinite(*x) ? -1 : 0;
}

int os_parse_decimal(const char *s, double *x) {
    const char *end;
    return os_parse_decimal_prefix(s, &end, x) < 0 || *end ? -1 : 0;
}

int os_parse_decimal_int(const char *s, long long lo, long long hi, long long *x) {
    size_t k = (*s == '+' || *s == '-');
    if (!digits(s + k) || s[k + digits(s + k)]) return -1;
    errno = 0;
    *x = strtoll(s, NULL, 10);
    return errno || *x < lo || *x > hi ? -1 : 0;
}

const char *os_double_str(double x, char *buf, size_t n) {
    for (int d = 6; d <= 17; d++) {   // from 6: %g's plain form for 100, not 1e+02
        snprintf(buf, n, "%.*g", d, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

const char *os_float_str(float x, char *buf, size_t n) {
    for (int d = 6; d <= 9; d++) {
        snprintf(buf, n, "%.*g", d, (double)x);
        if (strtof(buf, NULL) == x) break;
    }
    return buf;
}
