// Fuzz target: text through the Qwen2 tokenizer (src/tokenizer/): encode the bytes (any bytes: invalid UTF-8 must
// be an error, not a crash), decode the ids back, and decode the bytes read as ids. The tokenizer is
// tests/fuzz/model/tokenizer.json (a byte-level BPE with Qwen2's normaliser and split regex), or
// $OMNISHARD_FUZZ_TOKENIZER (e.g. the real Qwen2.5 one that tests/oracle/qwen_vocab.py builds).
#include "core/alloc.h"
#include "core/err.h"
#include "fuzz.h"
#include "tokenizer/tokenizer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static os_tokenizer *tok;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok) {
        char path[1024];
        const char *env = getenv("OMNISHARD_FUZZ_TOKENIZER");
        snprintf(path, sizeof path, "%s", env && *env ? env : "");
        if (!*path) snprintf(path, sizeof path, "%s/model/tokenizer.json", fuzz_dir());
        if (!(tok = os_tok_load(path))) os_die_err();
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    if (os_tok_encode(tok, (const char *)data, size, &ids, &n) == 0) {
        size_t len;
        char *text = os_tok_decode_n(tok, ids, n, &len);
        if (!text) os_die("fuzz: the ids of an encoded text do not decode: %s", os_errmsg());
        os_free(text);
        os_free(ids);
    }
    int64_t m = (int64_t)(size / 4);
    int32_t *any = malloc(m ? (size_t)m * 4 : 4);
    memcpy(any, data, (size_t)m * 4);
    int V = os_tok_vocab_size(tok);
    for (int64_t i = 0; i < m; i++) any[i] = (int32_t)((uint32_t)any[i] % (uint32_t)(V + 2)) - 1;   // -1 .. V
    size_t len;
    char *text = os_tok_decode_n(tok, any, m, &len);
    os_free(text);
    free(any);
    return 0;
}
