// The prompt of omnishard infer (infer.h): the part of a SLAM-Omni training sample before its answer, built by
// the dataset code (slam_record.c reads the record, slam_layout.c lays the rows out).
#include "core/alloc.h"
#include "core/err.h"
#include "kernels/ops.h"
#include "dataset/slam_dataset.h"
#include "dataset/slam_record.h"
#include "tokenizer/tokenizer.h"
#include "infer/infer.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NO_LIMIT ((int64_t)1 << 40)   // max_length: the prompt is never truncated

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = os_alloc(n + 1, "string");
    memcpy(d, s, n);
    return d;
}

// copy positions [0, L) of the [R, full] rows ids (and speech) into p
static void take(os_infer_prompt *p, int64_t R, int64_t L, int64_t full, const int32_t *ids, const uint8_t *speech) {
    p->R = R, p->L = L;
    p->ids = os_alloc(sizeof(int32_t) * (size_t)(R * L), "prompt ids");
    for (int64_t r = 0; r < R; r++) memcpy(p->ids + r * L, ids + r * full, sizeof(int32_t) * (size_t)L);
    if (speech) {
        p->speech = os_alloc((size_t)L, "prompt speech mask");
        memcpy(p->speech, speech, (size_t)L);
    }
}

static int blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r') return 0;
    return 1;
}

// the record {"source_text", "source_wav", "system_prompt", "task_type", "history", "target_text", "target_token"} of
// a question (the answer fields are placeholders that the record reader requires; no answer position is built)
static cJSON *question_record(const char *question, const char *wav, const char *system, const char *task,
                              const char *history) {
    cJSON *o = cJSON_CreateObject();
    int tts = task && !strcmp(task, "tts");
    if (question && !tts) cJSON_AddStringToObject(o, "source_text", question);
    else if (task && !strcmp(task, "asr")) cJSON_AddStringToObject(o, "source_text", ".");   // the transcript to predict
    if (wav) cJSON_AddStringToObject(o, "source_wav", wav);
    if (system) cJSON_AddStringToObject(o, "system_prompt", system);
    if (task) cJSON_AddStringToObject(o, "task_type", task);
    if (history && history[0]) cJSON_AddStringToObject(o, "history", history);
    cJSON_AddStringToObject(o, "target_text", tts ? question : ".");
    int zero = 0;
    cJSON_AddItemToObject(o, "target_token", cJSON_CreateIntArray(&zero, 1));
    return o;
}

static int encode(const os_tokenizer *tok, const char *what, const char *s, size_t n, int32_t **ids, int64_t *nids) {
    return os_tok_encode(tok, s, n, ids, nids) < 0 ? os_err_ctx("%s", what) : 0;
}

int os_infer_prompt_question(os_infer_prompt *p, const os_model *m, const char *model_dir, const char *question,
                             const char *wav, const char *system, const char *task, const char *history, int64_t T_s) {
    memset(p, 0, sizeof *p);
    if (task && strcmp(task, "s2s") && strcmp(task, "tts") && strcmp(task, "asr"))
        return os_errf("--task: expected s2s, tts or asr, got '%s'", task);
    int asr = task && !strcmp(task, "asr"), tts = task && !strcmp(task, "tts");
    if (question && blank(question)) return os_errf("--question: empty question (give the text, or --wav FILE)");
    if (!question && (!wav || tts)) return os_errf("--question: required%s", tts ? " (the text to speak, --task tts)" : " (or --wav FILE)");
    if (asr && !wav) return os_errf("--task asr: needs --wav FILE (the speech to transcribe)");
    if (wav && !tts && access(wav, R_OK) != 0) return os_errf("--wav: cannot read '%s': %m", wav);
    if (m->oc.G < 1) return os_errf("omnishard infer needs a SLAM-Omni model (code_layer >= 1)");

    char tokpath[4200];
    snprintf(tokpath, sizeof tokpath, "%s/tokenizer.json", model_dir);
    os_tokenizer *tok = os_tok_load(tokpath);
    if (!tok) return -1;
    cJSON *o = question_record(question, wav, system, task, history);
    os_slam_record r;
    int32_t *pr = NULL, *q = NULL;
    int64_t np = 0, nq = 0;
    int rc = os_slam_record_read(o, "--question", 1, m->oc.audio_vocab, 1, &r);
    if (rc == 0) {
        size_t len;
        char *text = os_slam_prompt_text(&r, &len);
        rc = encode(tok, "--system_prompt/--question (prompt text)", text, len, &pr, &np);
        os_free(text);
    }
    const char *qtext = r.task == OS_TASK_TTS ? r.answer : (!r.wav ? r.question : NULL);
    if (rc == 0 && qtext) rc = encode(tok, "--question", qtext, r.task == OS_TASK_TTS ? (size_t)r.answer_len : strlen(qtext), &q, &nq);
    if (rc == 0) {
        os_slam_config c = {.G = m->oc.G, .T = m->oc.text_vocab, .A = m->oc.audio_vocab, .max_length = NO_LIMIT,
                            .truncation = "right", .tokenizer_json = tokpath,
                            .speech_positions = T_s > 0 ? T_s : OS_SPEECH_POSITIONS, .latency = m->oc.latency,
                            .layershift = m->oc.layershift};
        os_slam_parts parts = {.task = r.task, .speech = r.wav != NULL, .prompt = pr, .np = np, .question = q, .nq = nq};
        int64_t P, S, La, R = c.G + 1;
        os_slam_lengths(&c, &parts, &P, &S, &La);
        os_sample s = {.ids = os_alloc(sizeof(int32_t) * (size_t)(R * (P + S)), "prompt ids"),
                       .labels = os_alloc(sizeof(int32_t) * (size_t)(R * (P + S)), "prompt labels"),
                       .speech = os_alloc((size_t)(P + S), "prompt speech mask")};
        os_slam_build(&c, &parts, 0, &s);   // keep 0 answer positions: the prompt and the input span
        take(p, R, s.L, s.L, s.ids, parts.speech ? s.speech : NULL);
        os_free(s.ids), os_free(s.labels), os_free(s.speech);
        if (parts.speech) p->wav = dup_str(wav);
        p->asr = asr;
        p->task = r.task;
    }
    cJSON_Delete(o);
    os_free(pr), os_free(q);
    os_tok_free(tok);
    return rc;
}

os_dataset *os_infer_dataset_open(const os_model *m, const char *model_dir, const char *path, int64_t T_s, int keep_bad) {
    if (m->oc.G < 1) {
        os_errf("omnishard infer needs a SLAM-Omni model (code_layer >= 1)");
        return NULL;
    }
    os_data_sizes z = {m->oc.G, m->oc.text_vocab, m->oc.audio_vocab, T_s, m->oc.latency, m->oc.layershift, 0, 0, NULL,
                       keep_bad, 1};
    return os_dataset_open(path, &z, model_dir, NO_LIMIT, "right");
}

int os_infer_prompt_record(os_infer_prompt *p, os_dataset *ds, int64_t index) {
    memset(p, 0, sizeof *p);
    os_sample s;
    if (index < 0 || index >= ds->n)
        return os_errf("--index %lld: %s has %lld usable record(s) (0..%lld)", (long long)index, ds->path, (long long)ds->n,
                       (long long)ds->n - 1);
    if (ds->get(ds, index, &s) < 0) return -1;
    if (s.lead <= 0)
        return os_errf("%s: pretokenized samples have no prompt/answer split; omnishard infer reads SLAM-Omni records "
                       "(docs/dataset.md)", ds->path);
    take(p, s.R, s.lead, s.L, s.ids, s.speech);
    const char *wav = s.wav_index >= 0 && ds->wav_path ? ds->wav_path(ds, s.wav_index) : NULL;
    if (wav) p->wav = dup_str(wav);
    p->asr = s.task == OS_TASK_ASR;
    p->task = s.task;
    return 0;
}

int os_infer_prompt_dataset(os_infer_prompt *p, const os_model *m, const char *model_dir, const char *path,
                            int64_t index, int64_t T_s) {
    memset(p, 0, sizeof *p);
    os_dataset *ds = os_infer_dataset_open(m, model_dir, path, T_s, 0);
    if (!ds) return -1;
    int rc = os_infer_prompt_record(p, ds, index);
    ds->free(ds);
    return rc;
}

void os_infer_prompt_free(os_infer_prompt *p) {
    os_free(p->ids), os_free(p->speech), os_free(p->wav);
    if (p->proj) os_k->free(p->proj);
    memset(p, 0, sizeof *p);
}
