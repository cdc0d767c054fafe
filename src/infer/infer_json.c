// omnishard infer's JSON output (infer_json.h).
#include "infer/infer_json.h"
#include "tokenizer/json_text.h"
#include "core/alloc.h"
#include "core/err.h"
#include "infer/infer_text.h"
#include "tokenizer/utf8.h"
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static void put_ids(FILE *f, const int32_t *v, int64_t n) {
    fputc('[', f);
    for (int64_t i = 0; i < n; i++) fprintf(f, i ? ",%d" : "%d", v[i]);
    fputc(']', f);
}

static void put_rows(FILE *f, const int32_t *v, int64_t rows, int64_t n) {
    fputc('[', f);
    for (int64_t k = 0; k < rows; k++) {
        if (k) fprintf(f, ", ");
        put_ids(f, v + k * n, n);
    }
    fputc(']', f);
}

void os_infer_write(FILE *f, const os_tokenizer *tok, const os_model *m, const os_infer_prompt *p,
                    const os_gen_result *r, int text_only, const os_infer_print_opts *o) {
    int64_t G = m->oc.G;
    size_t len = 0;
    char *s = tok ? os_infer_text(tok, r->text, r->ntext, 0, &len) : NULL;
    fprintf(f, "\"text\": ");
    os_json_string_write(f, s ? s : "", s ? len : 0);
    os_free(s);
    fprintf(f, ", \"text_ids\": ");
    put_ids(f, r->text, r->ntext);
    fprintf(f, ", \"audio\": ");
    put_rows(f, r->audio, G, r->naudio);
    fprintf(f, ", \"codec\": ");
    put_ids(f, r->codec, r->ncodec);
    fprintf(f, ", \"text_end\": %s, \"audio_end\": %s, \"text_only\": %s, \"steps\": %lld, \"prompt_positions\": %lld"
           ", \"decoder_positions\": %lld", r->text_end ? "true" : "false", r->audio_end ? "true" : "false",
           text_only ? "true" : "false", (long long)r->steps, (long long)p->L, (long long)r->positions);
    fprintf(f, ", \"code_layer\": %lld, \"text_vocab\": %lld, \"audio_vocab\": %lld, \"num_latency_tokens\": %d, "
           "\"do_layershift\": %s", (long long)G, (long long)m->oc.text_vocab, (long long)m->oc.audio_vocab, m->oc.latency,
           m->oc.layershift ? "true" : "false");
    if (o->round > 0) {
        fprintf(f, ", \"round\": %lld, \"history\": ", (long long)o->round);
        os_json_string_write(f, o->history, strlen(o->history));
    }
    if (o->show_prompt) {
        fprintf(f, ", \"prompt_input_ids\": ");
        put_rows(f, p->ids, p->R, p->L);
    }
}

char *os_infer_valid_utf8(char *buf, size_t *n) {
    if (!buf || os_utf8_invalid_at(buf, *n) < 0) return buf;
    size_t len;
    char *lossy = os_utf8_lossy(buf, *n, &len), *out = malloc(len + 1);
    if (!out) os_die("out of memory for an output line");
    memcpy(out, lossy, len + 1);
    os_free(lossy), free(buf);
    *n = len;
    return out;
}

void os_infer_print(const os_tokenizer *tok, const os_model *m, const os_infer_prompt *p, const os_gen_result *r,
                    int text_only, const os_infer_print_opts *o) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) os_die("out of memory for the answer");
    fputc('{', f);
    os_infer_write(f, tok, m, p, r, text_only, o);
    fputs("}\n", f);
    fclose(f);
    buf = os_infer_valid_utf8(buf, &n);
    fwrite(buf, 1, n, stdout);
    fflush(stdout);
    free(buf);
}
