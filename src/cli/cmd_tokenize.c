// omnishard tokenize: the Qwen2 tokenizer on the command line, one text per line (see usage below).
#include "cli/commands.h"
#include "tokenizer/json_text.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/opts.h"
#include "io/json_kind.h"
#include "core/timer.h"
#include "tokenizer/tokenizer.h"
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: omnishard tokenize --tokenizer FILE|MODEL_DIR [--decode [--skip_special_tokens]] [--json] [--stats]\n"
    "\n"
    "Reads lines from stdin and writes one line per input line to stdout.\n"
    "  encode (default): each line, without its trailing \"\\n\" (a \"\\r\" before it is kept), is encoded\n"
    "                    to a JSON array of token ids, e.g. [9707,1879]\n"
    "Errors (invalid UTF-8, a bad id, a malformed line) stop with a message naming the line, exit code 1.\n";

typedef struct {
    const char *tokenizer;
    int decode, json, stats, skip_special_tokens;
} tokenize_args;

#define F(n) .name = #n, .off = offsetof(tokenize_args, n)
static const os_opt OPTS[] = {
    {F(tokenizer), .type = OS_OPT_STR, .help = "a Hugging Face tokenizer.json of the Qwen2 family (byte-level BPE), or a model directory holding one (required)"},
    {F(decode), .type = OS_OPT_FLAG, .help = "each line is a JSON array of ids; prints the decoded text (special tokens kept)"},
    {F(skip_special_tokens), .type = OS_OPT_FLAG,
     .help = "with --decode: leave out the added tokens marked special (Hugging Face's option)"},
    {F(json), .type = OS_OPT_FLAG, .help = "texts are JSON strings, both ways (so that a text can hold newlines)"},
    {F(stats), .type = OS_OPT_FLAG, .help = "print lines, tokens, bytes and the seconds spent in the tokenizer on stderr"},
};
#undef F

static void put_ids(const int32_t *ids, int64_t n) {
    char buf[16];
    putchar_unlocked('[');
    for (int64_t i = 0; i < n; i++) {
        int k = sizeof buf;
        uint32_t v = (uint32_t)ids[i];   // ids are >= 0
        do buf[--k] = (char)('0' + v % 10); while (v /= 10);
        if (i) putchar_unlocked(',');
        fwrite_unlocked(buf + k, 1, sizeof buf - (size_t)k, stdout);
    }
    fputs_unlocked("]\n", stdout);
}

// the ids of a JSON array line into *ids (os_alloc'd), count returned; -1 with a message on a malformed line
static int64_t parse_ids(const char *line, size_t n, int32_t **ids) {
    *ids = NULL;
    cJSON *j = cJSON_ParseWithLength(line, n);
    if (!cJSON_IsArray(j)) {
        cJSON_Delete(j);
        return os_errf("expected a JSON array of integer ids");
    }
    int64_t m = cJSON_GetArraySize(j), k = 0;
    *ids = os_alloc((size_t)(m ? m : 1) * sizeof(int32_t), "ids");
    for (const cJSON *e = j->child; e; e = e->next, k++) {
        int64_t v;
        if (!os_json_int(e, INT32_MIN, INT32_MAX, &v)) {
            cJSON_Delete(j);
            os_free(*ids);
            *ids = NULL;
            return os_errf("element %lld: expected an integer id", (long long)k);
        }
        (*ids)[k] = (int32_t)v;
    }
    cJSON_Delete(j);
    return m;
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_args a = {0};
    const os_opt_group g = {.title = "options", .opts = OPTS, .n = (int)(sizeof OPTS / sizeof OPTS[0]), .obj = &a};
    const os_opt_cmd c = {.command = "tokenize", .usage = USAGE, .groups = &g, .ngroups = 1};
    int rc = os_opts_parse(&c, argc, argv);
    if (rc == 1) return os_opts_usage(&c, stdout), 0;
    if (rc == 0 && !a.tokenizer) rc = os_errf("--tokenizer FILE is required (a tokenizer.json or a model directory)");
    if (rc < 0) return fprintf(stderr, "omnishard tokenize: %s\n", os_errmsg()), os_opts_usage(&c, stderr), 2;
    const char *path = a.tokenizer;
    int decode = a.decode, json = a.json, stats = a.stats, skip = a.skip_special_tokens;
    double t0 = os_now();
    os_tokenizer *tok = os_tok_load(path);
    if (!tok) os_die_err();
    double t_load = os_now() - t0, t_work = 0;
    static char outbuf[1 << 20];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);

    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long long lineno = 0, ntok = 0, nbytes = 0;
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        size_t n = (size_t)got;
        if (n && line[n - 1] == '\n') n--;
        if (decode) {
            int32_t *ids;
            int64_t m = parse_ids(line, n, &ids);
            if (m < 0) goto fail;
            if (skip) {
                int64_t k = 0;
                for (int64_t i = 0; i < m; i++)
                    if (!os_tok_is_special(tok, ids[i])) ids[k++] = ids[i];
                m = k;
            }
            double t1 = os_now();
            size_t len;
            char *text = os_tok_decode_n(tok, ids, m, &len);
            t_work += os_now() - t1;
            os_free(ids);
            if (!text) goto fail;
            if (json) os_json_string_write(stdout, text, len);
            else fwrite(text, 1, len, stdout);
            putchar('\n');
            ntok += m;
            nbytes += (long long)len;
            os_free(text);
        } else {
            char *text = line, *own = NULL;
            if (json && !(text = own = os_json_string_parse(line, n, &n))) goto fail;
            int32_t *ids;
            int64_t m;
            double t1 = os_now();
            int rc = os_tok_encode(tok, text, n, &ids, &m);
            t_work += os_now() - t1;
            os_free(own);
            if (rc) goto fail;
            put_ids(ids, m);
            os_free(ids);
            ntok += m;
            nbytes += (long long)n;
        }
    }
    fflush(stdout);
    if (stats)
        fprintf(stderr, "tokenize: %lld lines, %lld tokens, %lld bytes; load %.3f s, %s %.3f s (%.0f tokens/s)\n",
                lineno, ntok, nbytes, t_load, decode ? "decode" : "encode", t_work, t_work > 0 ? ntok / t_work : 0.0);
    free(line);
    os_tok_free(tok);
    return 0;
fail:
    fflush(stdout);
    os_die("tokenize: stdin line %lld: %s", lineno, os_errmsg());
}
