#include "dataset/jsonrec.h"
#include "core/err.h"
#include <string.h>

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static void skip_ws(os_jsonrec *it) {
    while (it->pos < it->n && is_ws(it->buf[it->pos])) it->line += it->buf[it->pos++] == '\n';
}

int os_jsonrec_begin(os_jsonrec *it, const char *buf, size_t n, const char *path) {
    memset(it, 0, sizeof *it);
    it->buf = buf, it->n = n, it->path = path, it->line = 1;
    if (n >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3)) it->pos = 3;   // UTF-8 byte order mark
    skip_ws(it);
    if (it->pos == n) return os_errf("%s: the dataset is empty", path);
    char c = buf[it->pos];
    if (it->pos == 0 && n >= 4 && !memcmp(buf, "PAR1", 4))   // Parquet's magic: a Hugging Face dataset file
        return os_errf("%s: a Parquet file; --dataset reads JSON Lines, JSON or an `omnishard convert` folder: convert it "
                       "first with `omnishard convert` (docs/dataset.md), then pass the folder it writes", path);
    if (c != '[' && c != '{')
        return os_errf("%s:%lld: expected JSON Lines (one object per line) or a JSON array of objects, got '%c'",
                       path, (long long)it->line, c);
    it->array = c == '[';
    if (it->array) it->pos++;
    return 0;
}

// end of the JSON value starting at it->pos (object, array, string or scalar); -1 when unterminated
static int64_t value_end(os_jsonrec *it) {
    int64_t depth = 0;
    size_t p = it->pos;
    for (; p < it->n; p++) {
        char c = it->buf[p];
        if (c == '"') {
            for (p++; p < it->n && it->buf[p] != '"'; p++)
                if (it->buf[p] == '\\') p++;
            if (p >= it->n) return -1;
            if (depth == 0) return (int64_t)p + 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth <= 0) return depth < 0 ? (int64_t)p : (int64_t)p + 1;
        } else if (depth == 0 && (c == ',' || is_ws(c))) {
            return (int64_t)p;
        }
    }
    return depth == 0 ? (int64_t)p : -1;
}

int os_jsonrec_no_nul(const char *s, size_t n, const char *path, int64_t line) {
    const char *raw = memchr(s, 0, n);
    if (raw)
        return os_errf("%s:%lld: malformed JSON: a NUL byte (byte %lld of the record); JSON text cannot hold one raw",
                       path, (long long)line, (long long)(raw - s));
    int in = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"') in = !in;
        else if (in && s[i] == '\\') {
            if (i + 5 < n && !memcmp(s + i + 1, "u0000", 5))
                return os_errf("%s:%lld: malformed JSON: a \\u0000 escape in a string (byte %lld of the record): a NUL "
                               "character cannot be part of a field's text", path, (long long)line, (long long)i);
            i++;   // the escaped character (a quote, a backslash) is not the string's end
        }
    }
    return 0;
}

int os_jsonrec_next(os_jsonrec *it, size_t *off, size_t *len, int64_t *line) {
    if (it->done) return 0;
    if (!it->array) {   // JSONL: the next non-blank line
        for (;;) {
            if (it->pos >= it->n) return it->done = 1, 0;
            const char *nl = memchr(it->buf + it->pos, '\n', it->n - it->pos);
            size_t end = nl ? (size_t)(nl - it->buf) : it->n, s = it->pos;
            int64_t ln = it->line;
            it->pos = nl ? end + 1 : it->n, it->line++;
            while (s < end && is_ws(it->buf[s])) s++;
            size_t e = end;
            while (e > s && is_ws(it->buf[e - 1])) e--;
            if (e > s) {
                *off = s, *len = e - s, *line = ln;
                return 1;
            }
        }
    }
    skip_ws(it);
    if (it->pos >= it->n) return os_errf("%s:%lld: the JSON array is not closed (expected ']')", it->path, (long long)it->line);
    if (it->buf[it->pos] == ']') {
        it->pos++;
        skip_ws(it);
        if (it->pos < it->n)
            return os_errf("%s:%lld: unexpected text after the closing ']' of the JSON array", it->path, (long long)it->line);
        return it->done = 1, 0;
    }
    int64_t end = value_end(it);
    if (end < 0 || (size_t)end == it->pos)
        return os_errf("%s:%lld: malformed JSON array element (unterminated string, object or array)", it->path, (long long)it->line);
    *off = it->pos, *len = (size_t)end - it->pos, *line = it->line;
    for (size_t p = it->pos; p < (size_t)end; p++) it->line += it->buf[p] == '\n';
    it->pos = (size_t)end;
    skip_ws(it);
    if (it->pos < it->n && it->buf[it->pos] == ',') {
        it->pos++;
    } else if (it->pos >= it->n || it->buf[it->pos] != ']') {
        return os_errf("%s:%lld: malformed JSON array (expected ',' or ']' after an element)", it->path, (long long)it->line);
    }
    return 1;
}
