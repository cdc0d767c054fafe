// Training samples and collation. A sample is R = G+1 rows of L ids and labels (audio rows first, text last).
// Collation (slam-omni.md): the part before the answer (prompt + speech, `lead` positions) is left-padded and the
// answer right-padded to the longest of the batch, pad id in every row, labels -100, key mask 0 on padding.
#pragma once
#include "train/batch.h"
#include <stdint.h>

typedef struct {
    int64_t R, L;
    int32_t *ids, *labels;   // [R, L]
    uint8_t *speech;         // [L] or NULL: positions filled by the speech projector
    int64_t lead;            // positions before the answer (left-padded); 0 = right-pad everything
    int64_t wav_index;       // which speech input (-1 none); used by the speech front end
} os_sample;

typedef struct os_dataset os_dataset;
struct os_dataset {
    int64_t n;
    const char *path;
    int64_t skipped;   // records skipped while loading (reported at the end), see docs/dataset.md
    // fill *s with sample i (the dataset owns the memory until the next get or free); -1 + message on error
    int (*get)(os_dataset *d, int64_t i, os_sample *s);
    void (*free)(os_dataset *d);
    // path of speech input wav_index (a sample's os_sample.wav_index); NULL member when there is no speech
    const char *(*wav_path)(os_dataset *d, int64_t wav_index);
};

// Pretokenized JSONL: {"input_ids": [[...] x R], "labels": [[...] x R]} per line. Samples longer than
// max_length are truncated per strategy ("right": keep the first max_length, "left": keep the last,
// "delete": skip and count). Errors name the file and line.
os_dataset *os_pretok_open(const char *path, int64_t R, int64_t max_length, const char *truncation);

// collate samples s[0..n) into b (allocated here); pad_id fills padding
void os_collate(os_batch *b, const os_sample *s, int64_t n, int32_t pad_id);
