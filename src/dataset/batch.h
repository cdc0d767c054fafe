// Training samples and their collation into a micro-batch. A sample is R = G+1 rows of L ids and labels (audio
// layers 0..G-1, then text; 1 row for a plain LLM). Collation (slam-omni.md): the part before the answer (prompt +
// speech, `lead` positions) is left-padded and the answer right-padded to the longest of the batch, pad id in every
// row, labels -100, key mask 0 on padding.
#pragma once
#include <stdint.h>

typedef struct {
    int64_t R, L;
    int32_t *ids, *labels;   // [R, L]
    uint8_t *speech;         // [L] or NULL: positions filled by the speech projector
    int32_t *seg;            // [L] or NULL: a packed row's segment ids, one per member sample (dataset/pack.h)
    int64_t lead;            // positions before the answer (left-padded); 0 = right-pad everything
    int64_t wav_index;       // which speech input (-1 none); used by the speech front end
    const int64_t *wavs;     // a packed row's speech inputs (nwavs wav indices, in the order of its speech spans);
    int64_t nwavs;           //   0: the sample's one is wav_index
    int task;                // a SLAM-Omni record's task (os_slam_task: 0 s2s, 1 asr, 2 tts); 0 otherwise
    int64_t need;            // 0: the sample is whole; else it was cut or skipped by --max_length: the smallest
                             //   max_length that keeps it whole (cut) or trains it at all (skipped)
} os_sample;

typedef struct {
    int64_t B, L, R;
    int32_t *ids;      // [B, R, L] token ids (audio rows already shifted by +T)
    int32_t *labels;   // [B, R, L] raw labels (audio 0..A-1, text 0..T-1) or -100
    uint8_t *keymask;  // [B, L] 1 = real token, 0 = collation padding
    // speech input (may be NULL): positions whose audio-row embeddings are replaced by projector outputs
    uint8_t *speech;   // [B, L] 1 = speech position
    // packed rows (samples with seg; NULL otherwise): seg [B, L] segment ids (padding -1: a segment of its own),
    // pos [B, L] each position's index inside its segment (the RoPE positions: they restart at every sample)
    int32_t *seg, *pos;
} os_batch;

// The sizes a batch's ids and labels must fit: G audio layers (0: a plain LLM), T text and A audio vocabulary, V the
// model's input vocabulary (T + A, or T + G*A with layer shift).
typedef struct {
    int64_t G, T, A, V;
} os_batch_vocab;

void os_batch_alloc(os_batch *b, int64_t B, int64_t R, int64_t L);   // ids/labels filled with pad/-100 by caller
void os_batch_free(os_batch *b);
// collate samples s[0..n) into b (allocated here); pad_id fills padding. Packed rows (a sample with seg) also fill
// b's seg and pos
void os_collate(os_batch *b, const os_sample *s, int64_t n, int32_t pad_id);
// b's rows per sample (G+1, or 1), input ids in [0, V) and labels in their layer's range (or -100); -1 + message
// naming the sample, row and position when not
int os_batch_check(const os_batch *b, const os_batch_vocab *v);
