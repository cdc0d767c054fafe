// The lines of omnishard infer --output_file (infer_lines.h).
#include "infer/infer_lines.h"
#include "infer/infer_json.h"
#include "core/err.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const TASK_NAMES[] = {"s2s", "asr", "tts"};
const char *const OS_INFER_STOPS[3] = {"eot", "eoa", "max_new_tokens"};

int os_infer_stop_reason(const os_gen_result *r, int text_only) {
    if (!r->text_end || (!text_only && !r->audio_end)) return 2;
    return text_only || r->ntext >= r->naudio - 1 ? 0 : 1;
}

int64_t os_infer_record_line_no(os_dataset *ds, int64_t i) {
    const char *text;
    size_t len;
    int64_t line = 0;
    if (ds->record) ds->record(ds, i, &text, &len, &line);
    return line;
}

// the record's field name (or null) as JSON text
static void put_field(FILE *f, const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    char *t = v ? cJSON_PrintUnformatted(v) : NULL;
    fprintf(f, "\"%s\": %s, ", name, t ? t : "null");
    cJSON_free(t);
}

// a line's start: "{", the record's key, source_text, target_text (null where it has none, or where its text is not
// JSON: a malformed record), index and line. 1 when the record's text is JSON, else 0.
static int line_start(FILE *f, os_dataset *ds, int64_t i) {
    const char *text = "{}";
    size_t len = 2;
    int64_t line = 0;
    if (ds->record) ds->record(ds, i, &text, &len, &line);
    cJSON *o = cJSON_ParseWithLength(text, len);
    fputc('{', f);
    put_field(f, o, "key");
    put_field(f, o, "source_text");
    put_field(f, o, "target_text");
    cJSON_Delete(o);
    fprintf(f, "\"index\": %lld, \"line\": %lld, ", (long long)i, (long long)line);
    return o != NULL;
}

char *os_infer_line(os_dataset *ds, int64_t i, const os_tokenizer *tok, const os_model *m, const os_infer_prompt *p,
                    const os_gen_result *r, int text_only, int show_prompt, double sec, size_t *n) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, n);
    if (!f || !line_start(f, ds, i)) {
        if (f) fclose(f), free(buf);
        return os_errf("%s:%lld: the record cannot be read again (the file changed since it was opened?)", ds->path,
                       (long long)os_infer_record_line_no(ds, i)), NULL;
    }
    fprintf(f, "\"task\": \"%s\", \"stop\": \"%s\", \"text_tokens\": %lld, \"audio_positions\": %lld, \"seconds\": %.6f, ",
            TASK_NAMES[p->task], OS_INFER_STOPS[os_infer_stop_reason(r, text_only)], (long long)r->ntext,
            (long long)r->naudio, sec);
    os_infer_print_opts po = {show_prompt, 0, ""};
    os_infer_write(f, tok, m, p, r, text_only, &po);
    fputs("}\n", f);
    fclose(f);
    return os_infer_valid_utf8(buf, n);
}

char *os_infer_error_line(os_dataset *ds, int64_t i, const char *msg, size_t *n) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, n);
    if (!f) return NULL;
    line_start(f, ds, i);
    cJSON *e = cJSON_CreateString(msg);
    char *t = e ? cJSON_PrintUnformatted(e) : NULL;
    fprintf(f, "\"error\": %s}\n", t ? t : "\"(no memory for the message)\"");
    cJSON_free(t), cJSON_Delete(e);
    fclose(f);
    return os_infer_valid_utf8(buf, n);
}

void os_infer_record_message(os_dataset *ds, int64_t i, const char *msg, char *out, size_t cap) {
    char where[4200];
    snprintf(where, sizeof where, "%s:%lld:", ds->path, (long long)os_infer_record_line_no(ds, i));
    int named = !strncmp(msg, where, strlen(where));
    snprintf(out, cap, "%s%s%s", named ? "" : where, named ? "" : " ", msg);
}
