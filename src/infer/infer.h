// Generation from a trained SLAM-Omni model (omnishard infer, docs/inference.md; docs/spec/slam-omni.md
// "Inference"). The prompt is the part of a training sample before the answer (prompt + input span, built by the
// dataset code of src/dataset/slam_*.c); each step predicts the next text token (over logits[:T]) and G audio tokens
// in parallel (adapter over logits[T:T+A], one per layer; layer shift: layer g's own columns), appends them as a new
// position (audio ids +T, layer shift +T+g*A) and goes on:
//   - after eot the text row gets pad_t (no more text is predicted); the audio rows get pad_a once any layer has
//     emitted eoa; stop when both streams ended or after max_new_tokens steps;
//   - num_latency_tokens > 0: the first that many steps give pad_a in every audio row (not predicted).
// With the KV cache (the default) the prompt runs once and every step one position (src/infer/gen_forward.h); without
// it every step reruns the forward over the whole sequence [G+1, L]. Collective: every rank runs the
// same forwards (any ZeRO stage); rank 0 picks the tokens and broadcasts them, so all ranks stay in lockstep.
#pragma once
#include "infer/choose.h"
#include "dataset/dataset.h"
#include "session/session.h"
#include <stdint.h>

// The positions generation starts from: [G+1, L] model input ids (audio rows shifted by +T).
typedef struct {
    int64_t R, L;          // rows (G+1) and positions (P + S)
    int32_t *ids;          // [R, L]
    uint8_t *speech;       // [L] 1 = speech position (filled by the projector), NULL: none
    char *wav;             // the spoken question of the speech span (NULL: none)
    int asr;               // the input span ends with the asr marker (text answer only)
    int task;              // the record's task (os_slam_task: 0 s2s, 1 asr, 2 tts)
    float *proj;           // [T_s, C] (the backend's memory) the spoken question's projector output computed beforehand (os_infer_speech_batch,
                           //   with os_gen_opts.speech_batched), or NULL
} os_infer_prompt;

// From a text (or spoken, wav) question, as omnishard builds a SLAM-Omni record {"source_text": question,
// "source_wav": wav, "system_prompt": system, "task_type": task} (text before the last "<USER>:" is history);
// task "tts": question is the text to speak. history (NULL or ""; s2s only): earlier turns, the record's "history"
// field (the multi-round mode). T_s: speech positions of a spoken question (0: 300). The tokenizer is
// model_dir/tokenizer.json. 0, or -1 + message.
int os_infer_prompt_question(os_infer_prompt *p, const os_model *m, const char *model_dir, const char *question,
                             const char *wav, const char *system, const char *task, const char *history, int64_t T_s);
// Record `index` (0-based, among the records a training run would use) of a SLAM-Omni dataset file, built exactly as
// for training (src/dataset/slam_dataset.c) and cut before the answer. 0, or -1 + message.
int os_infer_prompt_dataset(os_infer_prompt *p, const os_model *m, const char *model_dir, const char *path,
                            int64_t index, int64_t T_s);
// The dataset of os_infer_prompt_dataset, opened once for many records (omnishard infer --output_file); NULL +
// message. Its records: os_infer_prompt_record (0, or -1 + message naming the file and line). keep_bad: a record
// that fails the checks at open (malformed JSON, wrong field types, an unreadable WAV) is kept, its
// os_infer_prompt_record failing with the message (os_data_sizes.keep_bad); 0: the open fails.
os_dataset *os_infer_dataset_open(const os_model *m, const char *model_dir, const char *path, int64_t T_s, int keep_bad);
int os_infer_prompt_record(os_infer_prompt *p, os_dataset *ds, int64_t index);
void os_infer_prompt_free(os_infer_prompt *p);

struct os_gen_result;

typedef struct {
    int64_t max_new_tokens;   // steps at most (>= 1)
    os_choice_opts choice;    // greedy or sampling (choose.h), the same for every stream
    double text_penalty;      // repetition penalty of the text stream over the text ids generated so far (1: none)
    double audio_penalty;     // of each audio layer over that layer's ids generated so far (pad_a included)
    uint64_t seed;            // sampling: the counter RNG stream (step, stream) -> uniform
    int text_only;            // audio rows pad_a from the start, no audio predicted (the reference's decode_text_only)
    int kv_cache;             // 1: prefill once, then one position per step; 0: the whole sequence every step
    int local;                // 1: this rank decodes its own prompt alone, no collective (parameters not sharded:
                              //   ZeRO 0-2; omnishard infer --output_file --zero_stage 0 splits records over ranks)
    int speech_batched;       // 1: the spoken questions went through the encoder and the projector beforehand, many
                              //   records at once (infer_speech.h): the prompt carries its projector output (proj),
                              //   no forward runs the speech path (on every rank alike)
    int lockstep;             // 1: this rank decodes its own prompt and picks its own tokens, but the forwards stay
                              //   collective (ZeRO-3, records split over ranks): every rank runs one forward per
                              //   step until the generation of every rank has ended; a rank whose own has ended,
                              //   that has none (prompt NULL) or whose prompt failed, runs forwards over pad
                              //   positions whose logits nobody reads, so it still takes part in every gather
    void (*progress)(void *ctx, const struct os_gen_result *so_far);   // os_generate: after each step of its
    void *progress_ctx;                                                //   sequence (its result so far); NULL: none
} os_gen_opts;

typedef struct os_gen_result {
    int64_t steps;            // forwards run (positions generated)
    int64_t positions;        // positions run through the decoder, all forwards together (prefill included)
    int32_t *text;            // text ids before eot (eot itself excluded) [ntext]
    int64_t ntext;
    int text_end, audio_end;  // eot / eoa was emitted
    int64_t naudio;           // audio positions: up to and including the step that emitted eoa
    int32_t *audio;           // [G, naudio] raw audio ids (0..A-1)
    int32_t *codec;           // the codec stream: audio read row-major (t0g0, t0g1, .., t1g0, ..) from position
                              //   num_latency_tokens up to the first eoa,
    int64_t ncodec;           //   special ids (>= A-64) left out
} os_gen_result;

// Collective (unless o->local); the same result on every rank. 0, or -1 + message on every rank (e.g. an unreadable
// WAV, a prompt longer than the model's max_position_embeddings). o->lockstep: each rank its own prompt and result,
// -1 + message on the failing rank only, after it took part in the collective forwards; p NULL: only those (r empty,
// 0).
int os_generate(os_session *s, const os_infer_prompt *p, const os_gen_opts *o, os_gen_result *r);
void os_gen_result_free(os_gen_result *r);
// what every generation checks first: the prompt's rows (G+1) and its length (at most the model's
// max_position_embeddings); 0, or -1 + message
int os_infer_prompt_check(const os_model *m, const os_infer_prompt *p);

// Batched decoding (omnishard infer --infer_batch_size B, infer_batch.c): the prompts 0 .. n-1, up to B at once,
// each with its own KV cache (o->kv_cache must be on). A free slot takes the next prompt (prompt(ctx, j, p): 0, or
// -1 + message), runs its prefill alone (B = 1, its speech path with it), then decodes with the others: every step
// runs one position of each sequence through one forward (the layers' and the head's products see the B rows, the
// attention runs per sequence over its own cache), and each sequence stops on its own (eot and eoa, or
// max_new_tokens); its slot then takes the next prompt, or stays idle when none is left. A sequence's tokens are
// those os_generate gives it (the sampling draws keyed by the seed and the sequence's own step and stream, not by
// its slot). done(ctx, j, p, r, seconds) gets each finished sequence, in the order they finish (0, or -1 +
// message). Collective unless o->local (every rank runs the same slots; rank 0 picks, one broadcast per step);
// o->lockstep (needs o->speech_batched): each rank its own prompts (n may differ, 0 too), slots and tokens, the
// forwards aligned over the ranks by pad forwards (infer_batch.c); a failure is this rank's (-1 + message after it
// took part in every rank's forwards).
// B at most OS_GEN_MAX_BATCH (gen_forward.h). 0, or -1 + message (every rank unless local).
typedef int (*os_gen_prompt_fn)(void *ctx, int64_t j, os_infer_prompt *p);
typedef int (*os_gen_done_fn)(void *ctx, int64_t j, const os_infer_prompt *p, const os_gen_result *r, double seconds);
int os_generate_batch(os_session *s, int64_t B, int64_t n, const os_gen_opts *o, os_gen_prompt_fn prompt,
                      os_gen_done_fn done, void *ctx);
