// The SLAM-Omni input embedding: x0[B*L, C] = mean over the R = G+1 rows of embed[ids] (docs/spec/slam-omni.md),
// with the speech splice (docs/speech.md): at the j-th speech position of a sample every audio row's embedding is
// replaced by its projector output proj[j], so x0 = (G * proj[j] + E[text id]) / (G+1).
#pragma once
#include <stdint.h>

typedef struct {
    int64_t B, R, L, C;
    const int32_t *ids;          // [B, R, L] on the backend
    const int32_t *hids;         // the same on the host
    const uint8_t *speech;       // [B, L] 1 = speech position (NULL: none)
    const float *const *proj;    // [B] projector output [T_s, C] of each sample (NULL, or a NULL entry: no speech)
} os_embed_task;

// E[V, C] -> x0[B*L, C]
void os_embed_fwd(const os_embed_task *t, const float *E, float *x0);
// dE[V, C] += the embedding gradient of the R rows from dx0[B*L, C] (dE NULL: frozen, nothing); at speech
// positions the audio rows get none and dproj[b][j] = dx0 * G/(G+1) (overwritten; dproj or an entry NULL: none).
void os_embed_bwd(const os_embed_task *t, float *const *dproj, const float *dx0, float *dE);
