// Record spans of a JSON dataset file held in memory: JSONL (one object per non-blank line) or one JSON array of
// objects (whitespace and newlines anywhere). Only the boundaries are found here (strings, escapes and nesting
// are tracked, values are not parsed); each span is then parsed with cJSON by the caller. Line numbers are
// 1-based and name the line where the record starts, for "file:line: ..." messages.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *buf, *path;
    size_t n, pos;
    int64_t line;   // line number at pos
    int array;      // 1: JSON array, 0: JSONL
    int done;
} os_jsonrec;

// Start reading buf[0..n) (path for messages). 0, or -1 + message when it is neither JSONL nor a JSON array.
int os_jsonrec_begin(os_jsonrec *it, const char *buf, size_t n, const char *path);
// Next record: 1 with its span and line, 0 at the end, -1 + "path:line: ..." when the array is malformed.
int os_jsonrec_next(os_jsonrec *it, size_t *off, size_t *len, int64_t *line);
// A record's text s[0..n) holds no NUL character: 0, or -1 + "path:line: malformed JSON: ..." naming a raw NUL byte
// (JSON forbids control characters in strings, and a C string would end there: the text was cut silently) or a
// \u0000 escape in a string (a NUL that no field of a record can hold), with its byte in the record.
int os_jsonrec_no_nul(const char *s, size_t n, const char *path, int64_t line);
