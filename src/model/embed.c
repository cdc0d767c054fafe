#include "model/embed.h"
#include "kernels/ops.h"
#include <string.h>

void os_embed_fwd(const os_embed_task *t, const float *E, float *x0) {
    int64_t L = t->L, C = t->C, R = t->R;
    for (int64_t bi = 0; bi < t->B; bi++) {
        for (int64_t r = 0; r < R; r++)
            (r ? os_k->embedding_acc : os_k->embedding_fwd)(x0 + bi * L * C, t->ids + (bi * R + r) * L, E, L, C, 1.0f / (float)R);
        const float *proj = t->proj ? t->proj[bi] : NULL;
        for (int64_t p = 0, j = 0; proj && p < L; p++) {
            if (!t->speech[bi * L + p]) continue;
            float *x = x0 + (bi * L + p) * C;
            os_k->embedding_fwd(x, t->ids + (bi * R + R - 1) * L + p, E, 1, C, 1.0f / (float)R);
            os_k->axpy(x, (float)(R - 1) / (float)R, proj + C * j++, C);
        }
    }
}

void os_embed_bwd(const os_embed_task *t, float *const *dproj_b, const float *dx0, float *dE) {
    int64_t L = t->L, C = t->C, R = t->R;
    for (int64_t bi = 0; bi < t->B; bi++) {
        const int32_t *ids = t->ids + bi * R * L;
        const float *dx = dx0 + bi * L * C;
        float *dproj = dproj_b ? dproj_b[bi] : NULL;
        if (!dproj) {
            for (int64_t r = 0; dE && r < R; r++) os_k->embedding_bwd(dE, ids + r * L, dx, L, C, 1.0f / (float)R);
            continue;
        }
        if (dE) os_k->embedding_bwd(dE, ids + (R - 1) * L, dx, L, C, 1.0f / (float)R);
        const uint8_t *sp = t->speech + bi * L;
        for (int64_t p = 0, j = 0; p < L; p++) {   // runs of non-speech positions for the audio rows
            if (sp[p]) {
                os_k->zero(dproj + C * j, C);
                os_k->axpy(dproj + C * j++, (float)(R - 1) / (float)R, dx + p * C, C);
                continue;
            }
            int64_t e = p;
            while (e < L && !sp[e]) e++;
            for (int64_t r = 0; dE && r < R - 1; r++) os_k->embedding_bwd(dE, ids + r * L + p, dx + p * C, e - p, C, 1.0f / (float)R);
            p = e - 1;
        }
    }
}
