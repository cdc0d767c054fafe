// The SLAM-Omni input embedding: x0[B*L, C] = mean over the R = G+1 rows of embed[ids] (docs/spec/slam-omni.md),
// with the speech splice (docs/speech.md): at the j-th speech position of a sample every audio row's embedding is
// replaced by its projector output proj[j], so x0 = (G * proj[j] + E[text id]) / (G+1). Forward and backward are
// each a fixed number of seam calls per micro-batch, whatever its samples, rows and positions.
#pragma once
#include <stdint.h>

typedef struct {
    int64_t B, R, L, C;
    const int32_t *ids;          // [B, R, L] on the backend
    const int32_t *hids;         // the same on the host
    const uint8_t *speech;       // [B, L] 1 = speech position (NULL: none)
    const float *proj;           // [*, C] the projector outputs, on the backend (NULL: no splice)
    const int64_t *proj_at;      // [B] (host) sample b's j-th speech position takes row proj_at[b] + j of proj;
                                 // -1: the sample has no speech (NULL when proj is)
} os_embed_task;

// E[V, C] -> x0[B*L, C]
void os_embed_fwd(const os_embed_task *t, const float *E, float *x0);
// dE[V, C] += the embedding gradient of the R rows from dx0[B*L, C] (dE NULL: frozen, nothing); at a spliced
// speech position the audio rows get none and dproj[proj_at[b] + j] = dx0 * G/(G+1) (those rows overwritten, on
// the backend as proj's; dproj NULL: none). Each table row's sum runs sample by sample; within a sample, over the
// rows r and positions in order, or, for a spliced sample, over the text row, then over the audio rows of each run
// of non-speech positions in turn.
void os_embed_bwd(const os_embed_task *t, float *dproj, const float *dx0, float *dE);
