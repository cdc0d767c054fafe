// The sample layout of a SLAM-Omni record (slam_layout.c; pure: ids in, rows out), as slam_dataset.h describes it:
// the sizes and special ids, the tokenized parts of one record, and the rows built from them.
#pragma once
#include "dataset/dataset.h"
#include "dataset/slam_record.h"   // os_slam_task

#define OS_SPEECH_POSITIONS 300   // the reference's T_s: 30 s -> 1500 Whisper frames -> 300 projector outputs

typedef struct {
    int G;                      // audio code layers (>= 1)
    int64_t T, A;               // padded text / audio vocabulary; specials at T-64+k and A-64+k
    int64_t max_length;
    const char *truncation;     // right | left | delete (docs/dataset.md)
    const char *tokenizer_json;
    int64_t speech_positions;   // Q of a spoken question (T_s; the model's encoder positions / projector k)
    int latency;                // num_latency_tokens: pad_a positions before the answer audio of every layer
    int layershift;             // do_layershift: layer g's audio ids at T + g*A (else every layer at T)
    int mask_equal;             // text and audio of the same length: every audio label -100 (the reference's)
    int no_speech;              // the model has no speech encoder: a record with a spoken question is an error at open
    const char *system;         // the system prompt of a record without system_prompt (NULL: the task's default)
    int keep_bad;               // a record failing the checks at open is kept, its get failing (os_data_sizes)
    int prompt_only;            // records need no answer and none is skipped for an empty one (os_data_sizes)
} os_slam_config;

// special ids (text ids absolute, audio ids raw: add T for input_ids)
static inline int32_t os_eot(int64_t T) { return (int32_t)(T - 64); }
static inline int32_t os_pad_t(int64_t T) { return (int32_t)(T - 63); }
static inline int32_t os_input_t(int64_t T) { return (int32_t)(T - 62); }
static inline int32_t os_answer_t(int64_t T) { return (int32_t)(T - 61); }
static inline int32_t os_asr_t(int64_t T) { return (int32_t)(T - 60); }
static inline int32_t os_eoa(int64_t A) { return (int32_t)(A - 64); }
static inline int32_t os_pad_a(int64_t A) { return (int32_t)(A - 63); }
static inline int32_t os_input_a(int64_t A) { return (int32_t)(A - 62); }
static inline int32_t os_answer_a(int64_t A) { return (int32_t)(A - 61); }

// The tokenized parts of one record.
typedef struct {
    int task;                              // os_slam_task
    int speech;                            // the question is a WAV: Q = speech_positions
    const int32_t *prompt; int64_t np;     // ids of "<SYSTEM>: {system_prompt}\n " + history
    const int32_t *question; int64_t nq;   // ids in the input span when not speech (text question, tts text)
    const int32_t *answer; int64_t na;     // answer text ids (eot is added)
    const int32_t *audio; int64_t naudio;  // answer codec tokens, raw 0..A-65
    int has_audio;                         // the record has target_token (asr may not: no answer audio then)
} os_slam_parts;

// the input id of raw audio id `raw` in layer g: T + raw, or T + g*A + raw with layer shift (snac_utils.py:21-25)
int32_t os_slam_audio_id(const os_slam_config *c, int64_t g, int32_t raw);
// lengths of the prompt, the input span and the answer of the untruncated sample (L = P + S + La)
void os_slam_lengths(const os_slam_config *c, const os_slam_parts *p, int64_t *P, int64_t *S, int64_t *La);
// Write the sample keeping the first `keep` answer positions (keep <= La) into s, whose ids/labels
// ([G+1, P+S+keep]) and speech ([P+S+keep]) buffers the caller provides; sets R, L, lead.
void os_slam_build(const os_slam_config *c, const os_slam_parts *p, int64_t keep, os_sample *s);
