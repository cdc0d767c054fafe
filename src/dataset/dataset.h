// Datasets of training samples (os_sample, collated into micro-batches by dataset/batch.h): pretokenized files and
// SLAM-Omni records, the format told by the first record; holding out an evaluation split.
#pragma once
#include "dataset/batch.h"
#include <stddef.h>
#include <stdint.h>

typedef struct os_dataset os_dataset;
struct os_dataset {
    int64_t n;
    const char *path;
    int64_t skipped;   // records skipped while loading (reported at the end), see docs/dataset.md
    int64_t bad;       // records kept with an error at open (os_data_sizes.keep_bad): their get fails
    int64_t bytes;     // size of the file and a digest (os_fnv1a) of all of it, hashed while it was read at open
    uint64_t digest;   // (the ranks compare them at start, docs/training.md)
    // fill *s with sample i (the dataset owns the memory until the next get or free); -1 + message on error
    int (*get)(os_dataset *d, int64_t i, os_sample *s);
    void (*free)(os_dataset *d);
    // path of speech input wav_index (a sample's os_sample.wav_index); NULL member when there is no speech
    const char *(*wav_path)(os_dataset *d, int64_t wav_index);
    // SLAM-Omni records (NULL otherwise): record i as it is in the file (its JSON text, valid until free) and its line
    void (*record)(os_dataset *d, int64_t i, const char **text, size_t *len, int64_t *line);
    // how many samples returned by get stay valid at once (the last `live` gets); 0 = all, until free
    int64_t live;
    // [n] or NULL: 1 = sample i was found unusable when this rank first built it (lazy tokenization); get
    // then returns a one-position sample without targets. Counted over all ranks by os_dataset_skipped_total.
    const uint8_t *lazy_skipped;
    // a mix of several files (dataset/mix.h): the datasets it draws from (skips are counted per file); else 0
    os_dataset *const *sources;
    int nsources;
};

// Pretokenized JSONL: {"input_ids": [[...] x R], "labels": [[...] x R]} per line. Samples longer than
// max_length are truncated per strategy ("right": keep the first max_length, "left": keep the last,
// "delete": skip and count). Errors name the file and line.
os_dataset *os_pretok_open(const char *path, int64_t R, int64_t max_length, const char *truncation);

// The model sizes a dataset needs.
typedef struct {
    int G;                      // audio code layers (0: a plain LLM, pretokenized data only)
    int64_t T, A;               // padded text / audio vocabulary (SLAM-Omni special ids at T-64+k, A-64+k)
    int64_t speech_positions;   // positions of a spoken question (T_s); 0: the reference's 300
    int latency, layershift;    // the model's num_latency_tokens and do_layershift (src/model/omni.h)
    int mask_equal;             // mask every audio label when text and audio have the same length (the reference's)
    int no_speech;              // 1: no speech encoder: a spoken question is an error naming FILE:LINE at open (training)
    const char *system;         // --system: the system prompt of records without one (NULL: the task's default)
    int keep_bad;               // 1 (omnishard infer --output_file): a SLAM-Omni record that fails the checks at open
                                //   (malformed JSON, wrong field types, an unreadable WAV) is kept as a record whose
                                //   get fails with its message naming FILE:LINE; 0: the open fails
    int prompt_only;            // 1 (omnishard infer): a record needs no answer (target_text, except tts's, and
                                //   target_token may be missing) and one with an empty answer is kept, not skipped
} os_data_sizes;

// Open a training/evaluation file, the format told by its first record: pretokenized JSONL ("input_ids") or
// SLAM-Omni records (JSONL or a JSON array; tokenizer MODEL_DIR/tokenizer.json). See docs/dataset.md.
os_dataset *os_dataset_open(const char *path, const os_data_sizes *z, const char *model_dir, int64_t max_length,
                            const char *truncation);
// Hold out round(n * ratio) samples (at least 1, at most n-1), chosen by a permutation keyed by seed, as *val;
// the rest, in file order, as *train. The two views share d (freed with the last of them).
int os_dataset_split(os_dataset *d, double ratio, uint64_t seed, os_dataset **train, os_dataset **val);
// Collective: samples skipped over all ranks (at open, plus the distinct lazily found ones). allreduce_max: the
// ranks' element-wise maximum of buf[n] in place (comm_allreduce_max_i64 of zero/comm.h; dataset/ calls no MPI).
int64_t os_dataset_skipped_total(os_dataset *d, void (*allreduce_max)(int64_t *buf, int64_t n));
