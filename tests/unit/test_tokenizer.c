// Unit tests for the tokenizer (src/tokenizer/tok*.c) on a small byte-level BPE written here as tokenizer.json with
// cJSON (256 byte tokens, a few merges, one added token, the Qwen2 pipeline). The comparison with Hugging Face
// on the real Qwen2.5 vocabulary is in tests/test_tokenizer.py; here:
//  - look-ups: vocab size, token ids of byte-level texts and of the added token, -1 when absent;
//  - BPE by merge rank: " the" -> [Ġthe], "the" -> [the], "é" -> [Ã©], an added token inside text;
//  - decode(encode(x)) == x for NFC text; "e" + U+0301 decodes to U+00E9 (NFC); invalid UTF-8 -> error with
//    the byte; out-of-range ids -> error; partial characters decode to U+FFFD;
//  - encoding from 4 threads at once (the shared cache) gives the single-thread ids.
#include "check.h"
#include "core/alloc.h"
#include "core/err.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// byte-level text of raw bytes s (static buffer)
static const char *bl(const char *s) {
    static char buf[4][64];
    static int k;
    k = (k + 1) % 4;
    int m = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        m += os_utf8_put((unsigned char *)buf[k] + m, os_tok_byte_char(*p));
    buf[k][m] = 0;
    return buf[k];
}

// merges in rank order, as raw byte strings; merge i makes token 256 + i
static const char *MERGES[][2] = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"}, {" ", "in"}, {"\xc3", "\xa9"},
                                  {"e", "r"}, {" ", "t"}, {"a", "b"}, {"ab", "ab"}};
#define N_MERGES (int)(sizeof MERGES / sizeof MERGES[0])
#define ADDED_ID 300

static void write_tokenizer(const char *path) {
    cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab"), *merges = cJSON_AddArrayToObject(model, "merges");
    for (int b = 0; b < 256; b++) {
        char s[2] = {(char)b, 0};
        cJSON_AddNumberToObject(vocab, b ? bl(s) : "\xc4\x80", b);   // byte 0 is U+0100
    }
    for (int i = 0; i < N_MERGES; i++) {
        char both[16];
        snprintf(both, sizeof both, "%s%s", MERGES[i][0], MERGES[i][1]);
        cJSON_AddNumberToObject(vocab, bl(both), 256 + i);
        const char *pair[2] = {bl(MERGES[i][0]), bl(MERGES[i][1])};
        cJSON_AddItemToArray(merges, cJSON_CreateStringArray(pair, 2));
    }
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens"), *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "id", ADDED_ID);
    cJSON_AddStringToObject(a, "content", "<|endoftext|>");
    cJSON_AddBoolToObject(a, "special", 1);
    cJSON_AddItemToArray(added, a);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "normalizer"), "type", "NFC");
    cJSON *pt = cJSON_AddObjectToObject(root, "pre_tokenizer"), *seq;
    cJSON_AddStringToObject(pt, "type", "Sequence");
    seq = cJSON_AddArrayToObject(pt, "pretokenizers");
    cJSON *split = cJSON_CreateObject(), *bytelevel = cJSON_CreateObject();
    cJSON_AddStringToObject(split, "type", "Split");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(split, "pattern"), "Regex",
                            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                            "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
    cJSON_AddStringToObject(split, "behavior", "Isolated");
    cJSON_AddBoolToObject(split, "invert", 0);
    cJSON_AddStringToObject(bytelevel, "type", "ByteLevel");
    cJSON_AddBoolToObject(bytelevel, "use_regex", 0);
    cJSON_AddItemToArray(seq, split);
    cJSON_AddItemToArray(seq, bytelevel);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "decoder"), "type", "ByteLevel");
    char *text = cJSON_Print(root);
    FILE *f = fopen(path, "w");
    if (!f) os_die("cannot write %s", path);
    fputs(text, f);
    fclose(f);
    cJSON_free(text);
    cJSON_Delete(root);
}

static int encode_eq(const os_tokenizer *t, const char *s, const int32_t *want, int64_t n) {
    int32_t *ids;
    int64_t m;
    if (os_tok_encode(t, s, strlen(s), &ids, &m)) return 0;
    int ok = m == n && (n == 0 || !memcmp(ids, want, (size_t)n * sizeof *ids));
    os_free(ids);
    return ok;
}

static char *roundtrip(const os_tokenizer *t, const char *s) {
    int32_t *ids;
    int64_t m;
    if (os_tok_encode(t, s, strlen(s), &ids, &m)) return NULL;
    char *out = os_tok_decode(t, ids, m);
    os_free(ids);
    return out;
}

static const char *TEXTS[] = {"the then there", " the in inner", "abababab ab", "caf\xc3\xa9 the", "", "   ",
                              "x<|endoftext|>the<|endoftext|>", "I'M here\r\n\n 123 4.5", "\xe4\xb8\xad\xe6\x96\x87 ok",
                              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabab"};
#define N_TEXTS (int)(sizeof TEXTS / sizeof TEXTS[0])

int main(void) {
    char path[] = "/tmp/omnishard_tok_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) os_die("mkstemp failed");
    close(fd);
    write_tokenizer(path);
    os_tokenizer *t = os_tok_load(path);
    if (!t) os_die_err();

    CHECK(os_tok_vocab_size(t) == ADDED_ID + 1, "vocab size %d", os_tok_vocab_size(t));
    CHECK(os_tok_token_id(t, "<|endoftext|>") == ADDED_ID, "added token id");
    CHECK(os_tok_token_id(t, bl(" the")) == 258, "id of Ġthe: %d", os_tok_token_id(t, bl(" the")));
    CHECK(os_tok_token_id(t, "the ") == -1, "absent token");
    CHECK(encode_eq(t, " the", (int32_t[]){258}, 1), "' the' is one token");
    CHECK(encode_eq(t, "the", (int32_t[]){257}, 1), "'the' is one token");
    CHECK(encode_eq(t, "\xc3\xa9", (int32_t[]){261}, 1), "U+00E9 is one token");
    CHECK(encode_eq(t, "e\xcc\x81", (int32_t[]){261}, 1), "e + U+0301 is NFC-composed to the U+00E9 token");
    CHECK(encode_eq(t, "abab", (int32_t[]){265}, 1), "abab by two ranked merges");
    CHECK(encode_eq(t, "<|endoftext|>the", (int32_t[]){ADDED_ID, 257}, 2), "added token then text");
    CHECK(encode_eq(t, "", NULL, 0), "empty text");

    for (int i = 0; i < N_TEXTS; i++) {
        char *back = roundtrip(t, TEXTS[i]);
        CHECK(back && !strcmp(back, TEXTS[i]), "roundtrip of '%s' gave '%s'", TEXTS[i], back ? back : os_errmsg());
        os_free(back);
    }
    char *nfc = roundtrip(t, "cafe\xcc\x81");
    CHECK(nfc && !strcmp(nfc, "caf\xc3\xa9"), "NFC composition on the way");
    os_free(nfc);

    int32_t *ids = NULL;
    int64_t n = 0;
    CHECK(os_tok_encode(t, "ab\xe4\xb8 x", 5, &ids, &n) == -1 && strstr(os_errmsg(), "not valid UTF-8 at byte 2"),
          "invalid UTF-8: %s", os_errmsg());
    CHECK(!ids && n == 0, "no ids on error");
    CHECK(!os_tok_decode(t, (int32_t[]){5, ADDED_ID + 1}, 2) && strstr(os_errmsg(), "out of range"), "bad id: %s",
          os_errmsg());
    CHECK(!os_tok_decode(t, (int32_t[]){280}, 1) && strstr(os_errmsg(), "has no token"), "gap id: %s", os_errmsg());
    char *part = os_tok_decode(t, (int32_t[]){0xe4, 0xb8, 'x'}, 3);   // the first two bytes of a 3-byte character
    CHECK(part && !strcmp(part, "\xef\xbf\xbdx"), "partial character -> one U+FFFD");
    os_free(part);

    // the same ids from 4 threads at once
    int32_t *want[N_TEXTS];
    int64_t nwant[N_TEXTS];
    for (int i = 0; i < N_TEXTS; i++)
        if (os_tok_encode(t, TEXTS[i], strlen(TEXTS[i]), &want[i], &nwant[i])) os_die_err();
    int bad = 0;
#pragma omp parallel for num_threads(4) reduction(+ : bad)
    for (int it = 0; it < 4000; it++) {
        int i = it % N_TEXTS;
        int32_t *got;
        int64_t m;
        if (os_tok_encode(t, TEXTS[i], strlen(TEXTS[i]), &got, &m) || m != nwant[i] ||
            (m && memcmp(got, want[i], (size_t)m * sizeof *got)))
            bad++;
        os_free(got);
    }
    CHECK(bad == 0, "%d concurrent encodings differ", bad);
    for (int i = 0; i < N_TEXTS; i++) os_free(want[i]);

    os_tok_free(t);
    remove(path);
    CHECK(!os_tok_load("/nonexistent/tokenizer.json") && strstr(os_errmsg(), "cannot open"), "missing file");
    return check_report("test_tokenizer");
}
