// One SLAM-Omni record (a parsed JSON object) checked field by field (docs/dataset.md "Schema"). Internal to
// slam_dataset.c; split out to keep the field rules in one place.
#pragma once
#include <cjson/cJSON.h>
#include <stdint.h>

typedef enum { OS_TASK_S2S = 0, OS_TASK_ASR = 1, OS_TASK_TTS = 2 } os_slam_task;

typedef struct {
    int task;                     // os_slam_task
    const char *wav;              // source_wav (as written) or NULL
    const char *history_text;     // 'history' (or "")
    const char *question;         // source_text after its last "<USER>:" (leading spaces dropped), or NULL
    int64_t nhist_src;            // bytes of source_text before its last "<USER>:" (history written inline); 0 unless s2s
    const char *source_text;      // source_text or NULL
    const char *answer;           // the answer text: target_text; asr: the transcript (below); answer_len bytes
    int64_t answer_len;
    const char *system_prompt;    // the record's, else the task's default
    int default_system;           // 1: the record has no system_prompt (the task's default is in system_prompt)
    const cJSON *tokens;          // target_token array or NULL (asr: optional, laid out in the audio rows, not trained)
    int64_t ntokens;
    const char *empty;            // non-NULL: why the answer is empty (the record is skipped)
} os_slam_record;

// Check o (record at path:line) against the schema, audio tokens against [0, A-64). prompt_only (omnishard infer: a
// test set may have no answers): target_text (except tts's, the text it speaks) and target_token may be missing, the
// answer then empty. 0, or -1 with a message "path:line: field 'x': ...".
int os_slam_record_read(const cJSON *o, const char *path, int64_t line, int64_t A, int prompt_only, os_slam_record *r);
// The prompt text "<SYSTEM>: {system_prompt}\n " + the history part: os_alloc'd, NUL-terminated.
char *os_slam_prompt_text(const os_slam_record *r, size_t *len);
// Only the "<SYSTEM>: ...\n " part / only the history part (both os_alloc'd), for history trimming. The history
// part follows speech_dataset_s2s.py:269-272 (s2s only): h = ('history' + source_text before its last "<USER>:")
// stripped as Python's str.strip(); h + "\n " when h is not empty, else "".
char *os_slam_system_text(const os_slam_record *r, size_t *len);
char *os_slam_history_text(const os_slam_record *r, size_t *len);
