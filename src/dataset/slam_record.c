#include "dataset/slam_record.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/json_kind.h"
#include "tokenizer/utf8.h"
#include <math.h>
#include <string.h>

static const char *const TASKS[] = {"s2s", "asr", "tts"};
// default system prompts of the reference recipes (conf/prompt*.yaml)
static const char *const DEFAULT_PROMPT[] = {
    "Conduct a spoken conversation with the user. ",
    "Transcribe the provided audio into accurate text. ",
    "Generate a natural and expressive spoken version of the given text. ",
};

// the field `name` (or its alias, the Parquet manifest's name) of o; *used = the name found
static const cJSON *field(const cJSON *o, const char *name, const char *alias, const char **used) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    *used = name;
    if (!v && alias) v = cJSON_GetObjectItemCaseSensitive(o, alias), *used = alias;
    if (v && cJSON_IsNull(v)) v = NULL;
    return v;
}

// optional string field: 0 with *out (NULL when absent), -1 + message when present but not a string
static int str_field(const cJSON *o, const char *path, int64_t line, const char *name, const char *alias, const char **out) {
    const char *used;
    const cJSON *v = field(o, name, alias, &used);
    *out = NULL;
    if (!v) return 0;
    // the Parquet manifest's audio column is {"path": ...}
    if (cJSON_IsObject(v) && alias && !strcmp(used, alias)) v = cJSON_GetObjectItemCaseSensitive(v, "path");
    if (!cJSON_IsString(v))
        return os_errf("%s:%lld: field '%s': expected a string, got %s", path, (long long)line, used, os_json_kind(v));
    *out = v->valuestring;
    return 0;
}

static int blank(const char *s, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') return 0;
    return 1;
}

// a chat record ({"messages": [{"role", "content"}, ...]}, ms-swift's and OpenAI's) without any SLAM-Omni field
static int chat_format(const cJSON *o) {
    static const char *const SLAM[] = {"source_wav", "question_audio", "source_text", "question", "target_text", "answer"};
    if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "messages"))) return 0;
    for (size_t i = 0; i < sizeof SLAM / sizeof SLAM[0]; i++)
        if (cJSON_GetObjectItemCaseSensitive(o, SLAM[i])) return 0;
    return 1;
}

int os_slam_record_read(const cJSON *o, const char *path, int64_t line, int64_t A, int prompt_only, os_slam_record *r) {
    memset(r, 0, sizeof *r);
    if (!cJSON_IsObject(o)) return os_errf("%s:%lld: expected a JSON object (one record), got %s", path, (long long)line, os_json_kind(o));
    const char *task = NULL, *target_text, *used;
    if (chat_format(o))
        return os_errf("%s:%lld: a record in ms-swift's / the OpenAI chat 'messages' format (role/content turns); "
                       "omnishard reads SLAM-Omni records (source_wav or source_text, target_text, target_token; "
                       "docs/dataset.md) and pretokenized lines {\"input_ids\", \"labels\"}: write the data in one of "
                       "those (omnishard convert turns the SLAM-Omni Parquet shards into records)", path, (long long)line);
    if (str_field(o, path, line, "task_type", NULL, &task) < 0) return -1;
    r->task = OS_TASK_S2S;
    if (task) {
        int k = 0;
        while (k < 3 && strcmp(task, TASKS[k])) k++;
        if (k == 3) return os_errf("%s:%lld: field 'task_type': expected s2s, asr or tts, got '%s'", path, (long long)line, task);
        r->task = k;
    }
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(o, "key");
    if (key && !cJSON_IsString(key) && !cJSON_IsNumber(key) && !cJSON_IsNull(key))
        return os_errf("%s:%lld: field 'key': expected a string or a number, got %s", path, (long long)line, os_json_kind(key));
    if (str_field(o, path, line, "source_wav", "question_audio", &r->wav) < 0 ||
        str_field(o, path, line, "source_text", "question", &r->source_text) < 0 ||
        str_field(o, path, line, "target_text", "answer", &target_text) < 0 ||
        str_field(o, path, line, "system_prompt", NULL, &r->system_prompt) < 0 ||
        str_field(o, path, line, "history", NULL, &r->history_text) < 0)
        return -1;
    if (r->wav && !r->wav[0]) return os_errf("%s:%lld: field 'source_wav': empty path", path, (long long)line);
    if (!r->system_prompt) r->system_prompt = DEFAULT_PROMPT[r->task], r->default_system = 1;
    if (!r->history_text) r->history_text = "";
    if (r->history_text[0] && r->task != OS_TASK_S2S)   // the reference adds history for s2s only (:269)
        return os_errf("%s:%lld: field 'history': only task_type s2s takes history, got task_type %s", path, (long long)line, TASKS[r->task]);
    int inline_user = 0;
    if (r->source_text) {   // "USER: .. ASSISTANT: .. <USER>: question": the turns before the last <USER>: are history
        const char *q = r->source_text, *hit;
        while ((hit = strstr(q, "<USER>:"))) q = hit + 7;
        inline_user = q != r->source_text;
        if (inline_user && r->task == OS_TASK_S2S) r->nhist_src = (int64_t)(q - 7 - r->source_text);
        r->question = q;
        while (*r->question == ' ') r->question++;
        if (r->task == OS_TASK_ASR) {   // the transcript: source_text after its last <USER>:, stripped (:298-301)
            r->answer = inline_user ? q : r->source_text, r->answer_len = (int64_t)strlen(r->answer);
            size_t b, e;
            if (inline_user) os_utf8_py_strip(q, (size_t)r->answer_len, &b, &e), r->answer += b, r->answer_len = (int64_t)(e - b);
        }
    }
    if (r->task == OS_TASK_TTS) r->wav = NULL;   // tts speaks the answer text: no question
    if (r->task == OS_TASK_ASR && !r->wav)
        return os_errf("%s:%lld: field 'source_wav': required by task_type asr (the speech to transcribe)", path, (long long)line);
    if (r->task == OS_TASK_ASR && !r->source_text)
        return os_errf("%s:%lld: field 'source_text': required by task_type asr (the transcript, after its last '<USER>:'; "
                       "'target_text' is not used by asr)", path, (long long)line);
    if (r->task == OS_TASK_S2S && !r->wav && !r->source_text)
        return os_errf("%s:%lld: field 'source_wav' or 'source_text': a question is required (a WAV path or text)", path, (long long)line);
    if (r->task != OS_TASK_ASR) {
        if (!target_text && (!prompt_only || r->task == OS_TASK_TTS))
            return os_errf("%s:%lld: field 'target_text': required (%s)", path, (long long)line,
                           r->task == OS_TASK_TTS ? "the text to speak, task_type tts" : "the answer text");
        r->answer = target_text ? target_text : "", r->answer_len = (int64_t)strlen(r->answer);
    }
    if (blank(r->answer, r->answer_len)) r->empty = r->task == OS_TASK_ASR ? "empty 'source_text' (the transcript)" : "empty 'target_text'";

    const cJSON *t = field(o, "target_token", "answer_cosyvoice_speech_token", &used);
    if (!t && (r->task == OS_TASK_ASR || prompt_only)) return 0;   // asr: answer audio optional (laid out, never a target)
    if (!t) return os_errf("%s:%lld: field 'target_token': required by task_type %s (the answer's codec tokens)", path, (long long)line, TASKS[r->task]);
    if (!cJSON_IsArray(t))
        return os_errf("%s:%lld: field '%s': expected an array of integers, got %s", path, (long long)line, used, os_json_kind(t));
    int64_t k = 0, lim = A - 64;
    for (const cJSON *x = t->child; x; x = x->next, k++) {
        int64_t v;
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble))   // integral, whatever its size
            return os_errf("%s:%lld: field '%s': item %lld: expected an integer, got %s", path, (long long)line, used, (long long)k, os_json_kind(x));
        if (!os_json_int(x, 0, lim - 1, &v))
            return os_errf("%s:%lld: field '%s': item %lld: token %.16g outside [0, %lld) (audio vocabulary %lld minus 64 specials)",
                           path, (long long)line, used, (long long)k, x->valuedouble, (long long)lim, (long long)A);
    }
    r->tokens = t, r->ntokens = k;
    if (k == 0 && !r->empty && r->task != OS_TASK_ASR) r->empty = "empty 'target_token' (no answer audio)";
    return 0;
}

static char *concat(const char *parts[], const size_t lens[], int n, size_t *len) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    char *s = os_alloc(total + 1, "prompt text");
    size_t at = 0;
    for (int i = 0; i < n; i++) memcpy(s + at, parts[i], lens[i]), at += lens[i];
    *len = total;
    return s;
}

char *os_slam_system_text(const os_slam_record *r, size_t *len) {
    const char *p[3] = {"<SYSTEM>: ", r->system_prompt, "\n "};
    size_t l[3] = {10, strlen(r->system_prompt), 2};
    return concat(p, l, 3, len);
}

char *os_slam_history_text(const os_slam_record *r, size_t *len) {
    size_t lh = strlen(r->history_text), n = lh + (size_t)r->nhist_src, b, e;
    char *h = os_alloc(n + 3, "history text");
    memcpy(h, r->history_text, lh);
    if (r->nhist_src) memcpy(h + lh, r->source_text, (size_t)r->nhist_src);
    os_utf8_py_strip(h, n, &b, &e);
    memmove(h, h + b, e - b);
    *len = e - b;
    if (e > b) memcpy(h + *len, "\n ", 2), *len += 2;
    h[*len] = 0;
    return h;
}

char *os_slam_prompt_text(const os_slam_record *r, size_t *len) {
    size_t ls, lh;
    char *s = os_slam_system_text(r, &ls), *h = os_slam_history_text(r, &lh);
    const char *p[2] = {s, h};
    size_t l[2] = {ls, lh};
    char *out = concat(p, l, 2, len);
    os_free(s), os_free(h);
    return out;
}
