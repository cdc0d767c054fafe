#include "model/embed.h"
#include "core/alloc.h"
#include "kernels/ops.h"
#include <string.h>

// the speech positions of sample bi: their count; pos[j] the j-th (j < count), at[p] its j or -1 (p < L)
static int64_t speech_rows(const os_embed_task *t, int64_t bi, int32_t *pos, int32_t *at) {
    int64_t n = 0;
    for (int64_t p = 0; p < t->L; p++) {
        at[p] = -1;
        if (t->speech[bi * t->L + p]) at[p] = (int32_t)n, pos[n++] = (int32_t)p;
    }
    return n;
}

void os_embed_fwd(const os_embed_task *t, const float *E, float *x0) {
    int64_t L = t->L, C = t->C, R = t->R;
    // the splice's lists (host: text ids at the speech positions, then each position's speech row or -1)
    int32_t *h = t->proj ? os_alloc(sizeof(int32_t) * (size_t)(3 * L + 1), "speech splice rows") : NULL;
    for (int64_t bi = 0; bi < t->B; bi++) {
        float *x = x0 + bi * L * C;
        for (int64_t r = 0; r < R; r++)
            (r ? os_k->embedding_acc : os_k->embedding_fwd)(x, t->ids + (bi * R + r) * L, E, L, C, 1.0f / (float)R);
        const float *proj = t->proj ? t->proj[bi] : NULL;
        if (!proj) continue;
        // speech rows: E[text id] / R + (R-1)/R * proj[j] made together in s [n, C], then put at their positions
        int32_t *pos = h + 2 * L, *at = h + L;
        int64_t n = speech_rows(t, bi, pos, at);
        for (int64_t j = 0; j < n; j++) h[j] = t->hids[(bi * R + R - 1) * L + pos[j]];
        memmove(h + n, at, sizeof(int32_t) * (size_t)L);   // [text ids n][at L]
        int32_t *d = os_k->alloc((int64_t)sizeof(int32_t) * (n + L), "speech splice rows (backend)");
        float *s = os_k->alloc((int64_t)sizeof(float) * (n ? n : 1) * C, "speech splice rows [n, C]");
        os_k->upload(d, h, (int64_t)sizeof(int32_t) * (n + L));
        os_k->embedding_fwd(s, d, E, n, C, 1.0f / (float)R);
        os_k->axpy(s, (float)(R - 1) / (float)R, proj, n * C);
        os_k->gather_rows(x, s, d + n, L, C);
        os_k->free(d), os_k->free(s);
    }
    os_free(h);
}

void os_embed_bwd(const os_embed_task *t, float *const *dproj_b, const float *dx0, float *dE) {
    int64_t L = t->L, C = t->C, R = t->R;
    int32_t *h = dproj_b ? os_alloc(sizeof(int32_t) * (size_t)(2 * L + 1), "speech splice rows") : NULL;
    for (int64_t bi = 0; bi < t->B; bi++) {
        const int32_t *ids = t->ids + bi * R * L;
        const float *dx = dx0 + bi * L * C;
        float *dproj = dproj_b ? dproj_b[bi] : NULL;
        if (!dproj) {
            for (int64_t r = 0; dE && r < R; r++) os_k->embedding_bwd(dE, ids + r * L, dx, L, C, 1.0f / (float)R);
            continue;
        }
        if (dE) os_k->embedding_bwd(dE, ids + (R - 1) * L, dx, L, C, 1.0f / (float)R);
        // dproj[j] = (R-1)/R * dx[pos[j]]: the rows gathered, then scaled into the zeroed dproj
        int64_t n = speech_rows(t, bi, h, h + L);
        int32_t *d = os_k->alloc((int64_t)sizeof(int32_t) * (n ? n : 1), "speech splice rows (backend)");
        float *s = os_k->alloc((int64_t)sizeof(float) * (n ? n : 1) * C, "speech splice rows [n, C]");
        os_k->upload(d, h, (int64_t)sizeof(int32_t) * n);
        os_k->gather_rows(s, dx, d, n, C);
        os_k->zero(dproj, n * C);
        os_k->axpy(dproj, (float)(R - 1) / (float)R, s, n * C);
        os_k->free(d), os_k->free(s);
        const uint8_t *sp = t->speech + bi * L;
        for (int64_t p = 0; dE && p < L; p++) {   // runs of non-speech positions for the audio rows
            if (sp[p]) continue;
            int64_t e = p;
            while (e < L && !sp[e]) e++;
            for (int64_t r = 0; r < R - 1; r++) os_k->embedding_bwd(dE, ids + r * L + p, dx + p * C, e - p, C, 1.0f / (float)R);
            p = e - 1;
        }
    }
    os_free(h);
}
