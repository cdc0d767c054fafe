// A collated micro-batch. R = G+1 rows (audio layers 0..G-1, then text), or 1 for a plain LLM.
#pragma once
#include <stdint.h>

typedef struct {
    int64_t B, L, R;
    int32_t *ids;      // [B, R, L] token ids (audio rows already shifted by +T)
    int32_t *labels;   // [B, R, L] raw labels (audio 0..A-1, text 0..T-1) or -100
    uint8_t *keymask;  // [B, L] 1 = real token, 0 = collation padding
    // speech input (may be NULL): positions whose audio-row embeddings are replaced by projector outputs
    uint8_t *speech;   // [B, L] 1 = speech position
} os_batch;

void os_batch_alloc(os_batch *b, int64_t B, int64_t R, int64_t L);   // ids/labels filled with pad/-100 by caller
void os_batch_free(os_batch *b);
