// Loading a Hugging Face tokenizer.json (byte-level BPE, the structure of the Qwen2 family) with cJSON.
// Everything this tokenizer does not implement is rejected with a message naming the field.
#include "core/alloc.h"
#include "core/err.h"
#include "io/atomic.h"
#include "io/json_kind.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// ByteLevel's own split regex (GPT-2), used when the pre-tokenizer is ByteLevel with use_regex true
static const char BYTELEVEL_REGEX[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

#define MAX_IDS (1 << 24)   // ids index per-id tables: far above any real vocabulary (Qwen2: 151,665)

typedef struct {
    const char *path;
    os_tokenizer *tok;
    int64_t text_used, text_cap;
} loader;

static int bad(const loader *L, const char *field, const char *expected, const cJSON *got) {
    return os_errf("%s: %s: expected %s, got %s", L->path, field, expected, os_json_kind(got));
}

// the string value of obj[name] in *out; 0 ok, -1 error (absent allowed when dflt is given)
static int get_str(const loader *L, const cJSON *obj, const char *name, const char *field, const char *dflt,
                   const char **out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!j && dflt) { *out = dflt; return 0; }
    if (!cJSON_IsString(j)) return bad(L, field, "a string", j);
    *out = j->valuestring;
    return 0;
}

// obj[name] must be absent, null or equal to the boolean `want`
static int want_bool(const loader *L, const cJSON *obj, const char *name, const char *field, int want) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!j || cJSON_IsNull(j)) return 0;
    if (!cJSON_IsBool(j)) return bad(L, field, "a boolean", j);
    if (cJSON_IsTrue(j) != want)
        return os_errf("%s: %s: %s is not supported (expected %s)", L->path, field, want ? "false" : "true",
                       want ? "true" : "false");
    return 0;
}

static int get_id(const loader *L, const cJSON *j, const char *field, int32_t *id) {
    int64_t v;
    if (!os_json_int(j, 0, MAX_IDS - 1, &v))
        return cJSON_IsNumber(j) ? os_errf("%s: %s: expected an id in 0..%d, got %g", L->path, field, MAX_IDS - 1,
                                           j->valuedouble)
                                 : bad(L, field, "an integer id", j);
    *id = (int32_t)v;
    return 0;
}

static char *keep_text(loader *L, const char *s, size_t n) {
    OS_ASSERT(L->text_used + (int64_t)n + 1 <= L->text_cap);
    char *p = L->tok->text + L->text_used;
    memcpy(p, s, n);
    p[n] = 0;
    L->text_used += (int64_t)n + 1;
    return p;
}

uint32_t os_tok_byte_char(int b) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    if (printable) return (uint32_t)b;
    int k = 0;   // the others get U+0100 upwards, in byte order
    for (int x = 0; x < b; x++) k += !((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF));
    return 256u + (uint32_t)k;
}

// the byte-level map, reversed: code point (< 324) -> byte, -1 for characters that are no byte
static void unicode_to_bytes(int16_t u2b[324]) {
    for (int i = 0; i < 324; i++) u2b[i] = -1;
    for (int b = 0; b < 256; b++) u2b[os_tok_byte_char(b)] = (int16_t)b;
}

// what token text s decodes to (the ByteLevel decoder): the bytes its characters stand for, or, when one of
// them is no byte-level character, its own UTF-8
static void set_decoding(loader *L, int32_t id, const char *s, size_t n, const int16_t u2b[324]) {
    os_tokenizer *t = L->tok;
    char *out = t->text + L->text_used;
    size_t i = 0, m = 0;
    while (i < n) {
        uint32_t c = os_utf8_next((const unsigned char *)s, &i);
        if (c >= 324 || u2b[c] < 0) { m = (size_t)-1; break; }
        out[m++] = (char)u2b[c];
    }
    if (m == (size_t)-1) {
        memcpy(out, s, n);
        m = n;
    }
    t->dec_off[id] = L->text_used;
    t->dec_len[id] = (int32_t)m;
    L->text_used += (int64_t)m;
}

static int load_model(loader *L, const cJSON *model, const cJSON *added, const int16_t u2b[324]) {
    os_tokenizer *t = L->tok;
    const char *type = "";
    if (!cJSON_IsObject(model)) return bad(L, "model", "an object", model);
    if (get_str(L, model, "type", "model.type", "BPE", &type)) return -1;
    if (strcmp(type, "BPE")) return os_errf("%s: model.type: expected \"BPE\", got \"%s\"", L->path, type);
    if (want_bool(L, model, "byte_fallback", "model.byte_fallback", 0) ||
        want_bool(L, model, "ignore_merges", "model.ignore_merges", 0))
        return -1;
    const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(model, affix[k]);
        if (j && !cJSON_IsNull(j) && !(cJSON_IsString(j) && !j->valuestring[0]))
            return os_errf("%s: model.%s: only an empty one is supported (got %s)", L->path, affix[k], os_json_kind(j));
    }
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
        return os_errf("%s: model.dropout: BPE dropout is not supported (expected null)", L->path);

    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab)) return bad(L, "model.vocab", "an object of token -> id", vocab);
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added)) return bad(L, "added_tokens", "an array", added);
    // sizes: ids, text
    int64_t n_vocab = 0, text = 0, n_added = 0;
    int32_t max_id = -1, id = 0;
    for (const cJSON *e = vocab->child; e; e = e->next, n_vocab++) {
        char field[96];
        snprintf(field, sizeof field, "model.vocab[\"%.60s\"]", e->string);
        if (get_id(L, e, field, &id)) return -1;
        if (id > max_id) max_id = id;
        text += (int64_t)strlen(e->string) + 1;
    }
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next, n_added++) {
        char field[64];
        snprintf(field, sizeof field, "added_tokens[%lld]", (long long)n_added);
        const char *content = "";
        if (!cJSON_IsObject(e)) return bad(L, field, "an object", e);
        char f[96];
        snprintf(f, sizeof f, "%s.id", field);
        if (get_id(L, cJSON_GetObjectItemCaseSensitive(e, "id"), f, &id)) return -1;
        snprintf(f, sizeof f, "%s.content", field);
        if (get_str(L, e, "content", f, NULL, &content)) return -1;
        if (!content[0]) return os_errf("%s: %s.content: empty", L->path, field);
        const char *flags[] = {"single_word", "lstrip", "rstrip", "normalized"};
        for (int k = 0; k < 4; k++) {
            snprintf(f, sizeof f, "%s.%s", field, flags[k]);
            if (want_bool(L, e, flags[k], f, 0)) return -1;
        }
        if (id > max_id) max_id = id;
        text += (int64_t)strlen(content) + 1;
    }
    if (max_id < 0) return os_errf("%s: model.vocab: empty", L->path);
    t->n_ids = max_id + 1;
    L->text_cap = 2 * text + 16;   // the texts, then what each id decodes to (never longer than its text)
    t->text = os_alloc((size_t)L->text_cap, "tokenizer texts");
    t->dec_off = os_alloc((size_t)t->n_ids * sizeof(int64_t), "tokenizer decode offsets");
    t->dec_len = os_alloc((size_t)t->n_ids * sizeof(int32_t), "tokenizer decode lengths");
    for (int32_t i = 0; i < t->n_ids; i++) t->dec_len[i] = -1;
    os_tok_strmap_init(&t->names, n_vocab + n_added);

    // the vocabulary
    const char **name_of = os_alloc((size_t)t->n_ids * sizeof(char *), "tokenizer id names");
    for (const cJSON *e = vocab->child; e; e = e->next) {
        id = (int32_t)e->valuedouble;
        if (name_of[id]) {   // the message first: it quotes name_of[id]
            os_errf("%s: model.vocab: id %d is given to both \"%s\" and \"%s\"", L->path, id, name_of[id], e->string);
            os_free(name_of);
            return -1;
        }
        size_t n = strlen(e->string);
        name_of[id] = keep_text(L, e->string, n);
        os_tok_strmap_put(&t->names, name_of[id], (uint32_t)n, id);
    }
    for (int b = 0; b < 256; b++) {
        unsigned char ch[4];
        int n = os_utf8_put(ch, os_tok_byte_char(b));
        t->byte_id[b] = os_tok_strmap_get(&t->names, (const char *)ch, (uint32_t)n);
    }

    // the merges, in rank order: ["a", "b"] or "a b"
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsArray(merges)) {
        os_free(name_of);
        return bad(L, "model.merges", "an array", merges);
    }
    os_tok_pairmap_init(&t->merges, cJSON_GetArraySize(merges));
    char *buf = NULL;
    size_t buf_cap = 0;
    int rank = 0, rc = 0;
    for (const cJSON *e = merges->child; e && !rc; e = e->next, rank++) {
        const char *a, *b;
        size_t na, nb;
        if (cJSON_IsString(e)) {
            a = e->valuestring;
            const char *sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                rc = os_errf("%s: model.merges[%d]: expected \"left right\" with one space, got \"%s\"", L->path,
                             rank, a);
                break;
            }
            na = (size_t)(sp - a);
            b = sp + 1;
        } else if (cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) && cJSON_IsString(e->child->next)) {
            a = e->child->valuestring;
            na = strlen(a);
            b = e->child->next->valuestring;
        } else {
            char f[64];
            snprintf(f, sizeof f, "model.merges[%d]", rank);
            rc = bad(L, f, "[\"left\", \"right\"] or \"left right\"", e);
            break;
        }
        nb = strlen(b);
        if (na + nb + 1 > buf_cap) {
            os_free(buf);
            buf_cap = 2 * (na + nb + 1);
            buf = os_alloc(buf_cap, "merge text");
        }
        memcpy(buf, a, na);
        memcpy(buf + na, b, nb + 1);
        int32_t ia = os_tok_strmap_get(&t->names, buf, (uint32_t)na);
        int32_t ib = os_tok_strmap_get(&t->names, b, (uint32_t)nb);
        int32_t im = os_tok_strmap_get(&t->names, buf, (uint32_t)(na + nb));
        const char *missing = ia < 0 ? "left" : ib < 0 ? "right" : im < 0 ? "merged" : NULL;
        if (missing) {
            rc = os_errf("%s: model.merges[%d]: the %s token \"%.*s\" is not in model.vocab", L->path, rank, missing,
                         ia < 0 ? (int)na : ib < 0 ? (int)nb : (int)(na + nb), ib < 0 && ia >= 0 ? b : buf);
            break;
        }
        os_tok_pairmap_put(&t->merges, ia, ib, rank, im);
    }
    os_free(buf);

    // decodings: vocabulary, then added tokens (which take precedence, as in Hugging Face tokenizers)
    for (int32_t i = 0; i < t->n_ids && !rc; i++)
        if (name_of[i]) set_decoding(L, i, name_of[i], strlen(name_of[i]), u2b);
    os_free(name_of);
    if (rc) return rc;
    t->n_added = (int)n_added;
    t->added = os_alloc((size_t)(n_added + 1) * sizeof *t->added, "added tokens");
    int k = 0;
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next, k++) {
        const char *content = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        size_t n = strlen(content);
        id = (int32_t)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        if (os_utf8_invalid_at(content, n) >= 0)
            return os_errf("%s: added_tokens[%d].content: not valid UTF-8", L->path, k);
        t->added[k].s = keep_text(L, content, n);
        t->added[k].len = (int32_t)n;
        t->added[k].id = id;
        t->added[k].special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"));
        os_tok_strmap_put(&t->names, t->added[k].s, (uint32_t)n, id);
        set_decoding(L, id, content, n, u2b);
    }
    return 0;
}

static int cmp_added(const void *pa, const void *pb) {
    const os_tok_added *a = pa, *b = pb;
    unsigned ca = (unsigned char)a->s[0], cb = (unsigned char)b->s[0];
    if (ca != cb) return ca < cb ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;   // longest first
    return strcmp(a->s, b->s);
}

static int index_added(os_tokenizer *t) {
    qsort(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added);
    int k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < t->n_added && (unsigned char)t->added[k].s[0] < b) k++;
        t->added_at[b] = k;
    }
    return 0;
}

static int compile_regex(loader *L, const char *pattern, int literal, const char *field) {
    int err;
    PCRE2_SIZE off;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    char *pcre = literal ? NULL : os_tok_regex_to_pcre2(pattern, &L->tok->re_stand_ins);
    L->tok->re = pcre2_compile((PCRE2_SPTR)(pcre ? pcre : pattern), PCRE2_ZERO_TERMINATED, opts, &err, &off, NULL);
    os_free(pcre);
    if (!L->tok->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return os_errf("%s: %s: PCRE2 cannot compile the regex at offset %zu: %s", L->path, field, (size_t)off,
                       (char *)msg);
    }
    L->tok->re_jit = pcre2_jit_compile(L->tok->re, PCRE2_JIT_COMPLETE) == 0;
    return 0;
}

// a ByteLevel step; add_prefix_space matters only in the pre-tokenizer (the decoder and post-processor ignore it)
static int check_bytelevel(loader *L, const cJSON *j, const char *field, int allow_regex, int *use_regex) {
    const char *type = "";
    char f[128];
    snprintf(f, sizeof f, "%s.type", field);
    if (get_str(L, j, "type", f, NULL, &type)) return -1;
    if (strcmp(type, "ByteLevel")) return os_errf("%s: %s: expected \"ByteLevel\", got \"%s\"", L->path, f, type);
    snprintf(f, sizeof f, "%s.add_prefix_space", field);
    if (!strncmp(field, "pre_tokenizer", 13) && want_bool(L, j, "add_prefix_space", f, 0)) return -1;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "use_regex");
    *use_regex = !r || cJSON_IsTrue(r);   // Hugging Face's default is true
    if (*use_regex && !allow_regex)
        return os_errf("%s: %s.use_regex: true is not supported after a Split (expected false)", L->path, field);
    return 0;
}

static int load_pre_tokenizer(loader *L, const cJSON *pt) {
    const char *type = "";
    int use_regex;
    if (!cJSON_IsObject(pt)) return bad(L, "pre_tokenizer", "an object (Sequence[Split, ByteLevel] or ByteLevel)", pt);
    if (get_str(L, pt, "type", "pre_tokenizer.type", NULL, &type)) return -1;
    if (!strcmp(type, "ByteLevel")) {
        if (check_bytelevel(L, pt, "pre_tokenizer", 1, &use_regex)) return -1;
        return use_regex ? compile_regex(L, BYTELEVEL_REGEX, 0, "pre_tokenizer (ByteLevel regex)") : 0;
    }
    if (strcmp(type, "Sequence"))
        return os_errf("%s: pre_tokenizer.type: expected \"Sequence\" or \"ByteLevel\", got \"%s\"", L->path, type);
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
    if (!cJSON_IsArray(seq) || cJSON_GetArraySize(seq) != 2)
        return bad(L, "pre_tokenizer.pretokenizers", "an array [Split, ByteLevel]", seq);
    const cJSON *split = seq->child, *bl = seq->child->next;
    if (!cJSON_IsObject(split)) return bad(L, "pre_tokenizer.pretokenizers[0]", "an object", split);
    if (get_str(L, split, "type", "pre_tokenizer.pretokenizers[0].type", NULL, &type)) return -1;
    if (strcmp(type, "Split"))
        return os_errf("%s: pre_tokenizer.pretokenizers[0].type: expected \"Split\", got \"%s\"", L->path, type);
    const char *behavior = "";
    if (get_str(L, split, "behavior", "pre_tokenizer.pretokenizers[0].behavior", NULL, &behavior)) return -1;
    if (strcmp(behavior, "Isolated"))
        return os_errf("%s: pre_tokenizer.pretokenizers[0].behavior: expected \"Isolated\", got \"%s\"", L->path,
                       behavior);
    if (want_bool(L, split, "invert", "pre_tokenizer.pretokenizers[0].invert", 0)) return -1;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(split, "pattern");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
    if (!cJSON_IsString(re) && !cJSON_IsString(lit))
        return bad(L, "pre_tokenizer.pretokenizers[0].pattern", "{\"Regex\": \"...\"} or {\"String\": \"...\"}", pat);
    if (!cJSON_IsObject(bl)) return bad(L, "pre_tokenizer.pretokenizers[1]", "an object", bl);
    if (check_bytelevel(L, bl, "pre_tokenizer.pretokenizers[1]", 0, &use_regex)) return -1;
    return cJSON_IsString(re) ? compile_regex(L, re->valuestring, 0, "pre_tokenizer.pretokenizers[0].pattern.Regex")
                              : compile_regex(L, lit->valuestring, 1, "pre_tokenizer.pretokenizers[0].pattern.String");
}

static int load_pipeline(loader *L, const cJSON *root) {
    const char *type = "";
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (norm && !cJSON_IsNull(norm)) {
        if (!cJSON_IsObject(norm)) return bad(L, "normalizer", "an object or null", norm);
        if (get_str(L, norm, "type", "normalizer.type", NULL, &type)) return -1;
        if (strcmp(type, "NFC"))
            return os_errf("%s: normalizer.type: only \"NFC\" (or no normalizer) is supported, got \"%s\"", L->path,
                           type);
        L->tok->nfc = 1;
    }
    if (load_pre_tokenizer(L, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"))) return -1;
    int use_regex;
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (!cJSON_IsObject(dec)) return bad(L, "decoder", "a ByteLevel decoder", dec);
    if (check_bytelevel(L, dec, "decoder", 1, &use_regex)) return -1;
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    if (post && !cJSON_IsNull(post)) {
        if (!cJSON_IsObject(post)) return bad(L, "post_processor", "a ByteLevel post-processor or null", post);
        if (check_bytelevel(L, post, "post_processor", 1, &use_regex)) return -1;
    }
    return 0;
}

os_tokenizer *os_tok_load(const char *file_or_dir) {
    char dirfile[4200];   // a model directory means its tokenizer.json
    struct stat st;
    const char *path = file_or_dir;
    if (stat(file_or_dir, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (snprintf(dirfile, sizeof dirfile, "%s/tokenizer.json", file_or_dir) >= (int)sizeof dirfile) {
            os_errf("%s: path too long", file_or_dir);
            return NULL;
        }
        path = dirfile;
    }
    size_t n = 0;
    char *json = os_read_file(path, &n);
    if (!json) return NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, n, &end, 0);
    if (!root) {
        os_errf("%s: not valid JSON (parse error near byte %lld)", path, (long long)(end ? end - json : 0));
        os_free(json);
        return NULL;
    }
    os_free(json);
    os_tokenizer *t = os_alloc(sizeof *t, "tokenizer");
    pthread_mutex_init(&t->cache_lock, NULL);
    size_t pn = strlen(path);
    t->path = os_alloc(pn + 1, "tokenizer path");
    memcpy(t->path, path, pn + 1);
    loader L = {.path = path, .tok = t};
    int16_t u2b[324];
    unicode_to_bytes(u2b);
    int rc = cJSON_IsObject(root) ? 0 : bad(&L, "(top level)", "an object", root);
    if (!rc) rc = load_model(&L, cJSON_GetObjectItemCaseSensitive(root, "model"),
                             cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), u2b);
    if (!rc) rc = index_added(t);
    if (!rc) rc = load_pipeline(&L, root);
    cJSON_Delete(root);
    if (rc) {
        os_tok_free(t);
        return NULL;
    }
    t->cache = os_tok_cache_new();
    return t;
}
