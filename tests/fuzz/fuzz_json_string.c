// Fuzz target: a JSON string literal as `omnishard tokenize --json` reads one per line (src/tokenizer/json_text.c). A
// literal that parses is written back and parsed again: the text must come back byte for byte.
#include "tokenizer/json_text.h"
#include "core/alloc.h"
#include "core/err.h"
#include "fuzz.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t len, len2, n;
    char *text = os_json_string_parse((const char *)data, size, &len);
    if (!text) return 0;
    char *buf = NULL;
    FILE *f = open_memstream(&buf, &n);
    if (!f) os_die("fuzz: open_memstream failed");
    os_json_string_write(f, text, len);
    if (fclose(f)) os_die("fuzz: fclose of the memory stream failed");
    char *back = os_json_string_parse(buf, n, &len2);
    if (!back) os_die("fuzz: a written literal does not parse: %s (%.*s)", os_errmsg(), (int)n, buf);
    if (len2 != len || memcmp(back, text, len)) os_die("fuzz: the text changed on its way through a literal");
    os_free(back);
    os_free(text);
    free(buf);
    return 0;
}
