// Fuzz target: a tokenizer.json (src/tokenizer/tok_load.c); a file that loads then encodes a fixed text.
#include "fuzz.h"
#include "core/alloc.h"
#include "tokenizer/tokenizer.h"
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    os_tokenizer *tok = os_tok_load(fuzz_file(data, size, "tokenizer.json"));
    if (!tok) return 0;
    static const char text[] = "Hello world, it's 2026!\n  <|im_start|>user\nna\xc3\xafve caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd";
    int32_t *ids = NULL;
    int64_t n = 0;
    if (os_tok_encode(tok, text, sizeof text - 1, &ids, &n) == 0) {
        size_t len;
        os_free(os_tok_decode_n(tok, ids, n, &len));
        os_free(ids);
    }
    os_tok_free(tok);
    return 0;
}
