// omnishard infer's JSON output (infer_json.h).
#include "cli/infer_json.h"
#include "cli/json_text.h"
#include "core/alloc.h"
#include "infer/infer_text.h"
#include <stdio.h>
#include <string.h>

static void put_ids(const int32_t *v, int64_t n) {
    putchar('[');
    for (int64_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", v[i]);
    putchar(']');
}

static void put_rows(const int32_t *v, int64_t rows, int64_t n) {
    putchar('[');
    for (int64_t k = 0; k < rows; k++) {
        if (k) printf(", ");
        put_ids(v + k * n, n);
    }
    putchar(']');
}

void os_infer_print(const os_tokenizer *tok, const os_model *m, const os_infer_prompt *p, const os_gen_result *r,
                    int text_only, const os_infer_print_opts *o) {
    int64_t G = m->oc.G;
    size_t len = 0;
    char *s = tok ? os_infer_text(tok, r->text, r->ntext, 0, &len) : NULL;
    printf("{\"text\": ");
    os_json_string_write(stdout, s ? s : "", s ? len : 0);
    os_free(s);
    printf(", \"text_ids\": ");
    put_ids(r->text, r->ntext);
    printf(", \"audio\": ");
    put_rows(r->audio, G, r->naudio);
    printf(", \"codec\": ");
    put_ids(r->codec, r->ncodec);
    printf(", \"text_end\": %s, \"audio_end\": %s, \"text_only\": %s, \"steps\": %lld, \"prompt_positions\": %lld"
           ", \"decoder_positions\": %lld", r->text_end ? "true" : "false", r->audio_end ? "true" : "false",
           text_only ? "true" : "false", (long long)r->steps, (long long)p->L, (long long)r->positions);
    printf(", \"code_layer\": %lld, \"text_vocab\": %lld, \"audio_vocab\": %lld, \"num_latency_tokens\": %d, "
           "\"do_layershift\": %s", (long long)G, (long long)m->oc.text_vocab, (long long)m->oc.audio_vocab, m->oc.latency,
           m->oc.layershift ? "true" : "false");
    if (o->round > 0) {
        printf(", \"round\": %lld, \"history\": ", (long long)o->round);
        os_json_string_write(stdout, o->history, strlen(o->history));
    }
    if (o->show_prompt) {
        printf(", \"prompt_input_ids\": ");
        put_rows(p->ids, p->R, p->L);
    }
    printf("}\n");
    fflush(stdout);
}
