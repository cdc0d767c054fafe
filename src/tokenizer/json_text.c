#include "tokenizer/json_text.h"
#include "core/alloc.h"
#include "core/err.h"
#include "tokenizer/utf8.h"
#include <stdint.h>

static int hex4(const char *s, size_t n, size_t i, uint32_t *v) {
    if (i + 4 > n) return -1;
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[i + (size_t)k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

char *os_json_string_parse(const char *s, size_t n, size_t *len) {
    size_t i = 0;
    while (i < n && is_space(s[i])) i++;
    while (n > i && is_space(s[n - 1])) n--;
    if (i >= n || s[i] != '"' || n - i < 2 || s[n - 1] != '"') {
        os_errf("expected a JSON string (--json)");
        return NULL;
    }
    unsigned char *out = os_alloc(n + 1, "text"), *o = out;   // escapes never grow the text
    for (i++, n--; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == '"') {
            os_errf("JSON string: unescaped %s at byte %zu", c == '"' ? "quote" : "control character", i);
            goto fail;
        }
        if (c != '\\') {
            *o++ = c;
            i++;
            continue;
        }
        if (i + 1 >= n) {
            os_errf("JSON string: lone backslash at byte %zu", i);
            goto fail;
        }
        char e = s[i + 1];
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        int k = 0;
        while (from[k] && from[k] != e) k++;
        if (from[k]) {
            *o++ = (unsigned char)to[k];
            i += 2;
            continue;
        }
        uint32_t v, lo;
        if (e != 'u' || hex4(s, n, i + 2, &v)) {
            os_errf("JSON string: invalid escape at byte %zu", i);
            goto fail;
        }
        i += 6;
        if (v >= 0xD800 && v <= 0xDBFF && i + 1 < n && s[i] == '\\' && s[i + 1] == 'u' && !hex4(s, n, i + 2, &lo) &&
            lo >= 0xDC00 && lo <= 0xDFFF) {
            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
        } else if (v >= 0xD800 && v <= 0xDFFF) {
            os_errf("JSON string: unpaired surrogate \\u%04X at byte %zu", v, i - 6);
            goto fail;
        }
        o += os_utf8_put(o, v);
    }
    *o = 0;
    *len = (size_t)(o - out);
    return (char *)out;
fail:
    os_free(out);
    return NULL;
}

void os_json_string_write(FILE *f, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    putc_unlocked('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            putc_unlocked('\\', f);
            putc_unlocked((int)c, f);
        } else if (c < 0x20) {
            const char *short_esc = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            if (short_esc) fputs_unlocked(short_esc, f);
            else fprintf(f, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
        } else putc_unlocked((int)c, f);
    }
    putc_unlocked('"', f);
}
