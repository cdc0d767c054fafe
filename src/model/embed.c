#include "model/embed.h"
#include "core/alloc.h"
#include "core/ids.h"
#include "kernels/ops.h"
#include <string.h>

// does sample bi take projector rows at its speech positions?
static int spliced(const os_embed_task *t, int64_t bi) { return t->speech && t->proj && t->proj_at[bi] >= 0; }

// the micro-batch's speech positions, sample by sample: their count n; the k-th (k < n) is row pos[k] of x0
// (bi * L + p) and takes projector row src[k] (proj_at[bi] + j, its j-th in the sample). pos, src: B*L entries
static int64_t speech_rows(const os_embed_task *t, int32_t *pos, int32_t *src) {
    int64_t n = 0;
    for (int64_t bi = 0; bi < t->B; bi++)
        for (int64_t p = 0, j = 0; spliced(t, bi) && p < t->L; p++)
            if (t->speech[bi * t->L + p]) pos[n] = (int32_t)(bi * t->L + p), src[n++] = (int32_t)(t->proj_at[bi] + j++);
    return n;
}

void os_embed_fwd(const os_embed_task *t, const float *E, float *x0) {
    int64_t N = t->B * t->L, C = t->C, R = t->R;
    os_k->embedding_fwd(x0, t->ids, E, t->B, R, t->L, C, 1.0f / (float)R);
    if (!t->proj) return;
    // the speech rows: E[text id] / R + (R-1)/R * proj[src] made together in s [n, C], then put at their positions
    int32_t *h = os_alloc(sizeof(int32_t) * (size_t)(4 * N + 1), "speech splice rows");   // pos, src [N] | the list
    int64_t n = speech_rows(t, h, h + N);
    int32_t *list = h + 2 * N;   // [text ids n][projector rows n][each row of x0: its speech row or -1, N]
    for (int64_t k = 0; k < n; k++)
        list[k] = t->hids[(h[k] / t->L * R + R - 1) * t->L + h[k] % t->L], list[n + k] = h[N + k];
    for (int64_t i = 0; i < N; i++) list[2 * n + i] = -1;
    for (int64_t k = 0; k < n; k++) list[2 * n + h[k]] = (int32_t)k;
    if (n) {
        int32_t *d = os_ids_upload(list, 2 * n + N, "speech splice rows (backend)");
        float *s = os_k->alloc((int64_t)sizeof(float) * 2 * n * C, "speech splice rows [2n, C]");   // s | proj rows
        os_k->embedding_fwd(s, d, E, 1, 1, n, C, 1.0f / (float)R);
        os_k->gather_rows(s + n * C, t->proj, d + n, n, C);
        os_k->axpy(s, (float)(R - 1) / (float)R, s + n * C, n * C);
        os_k->gather_rows(x0, s, d + 2 * n, N, C);
        os_k->free(d), os_k->free(s);
    }
    os_free(h);
}

// dE += the rows' gradient: the (table row, row of dx0) pairs in the order of each table row's sum (embed.h),
// grouped by table row (core/ids.h os_ids_group) into one scatter-add
static void table_bwd(const os_embed_task *t, const float *dx0, float *dE) {
    int64_t B = t->B, R = t->R, L = t->L, M = 0, n = B * R * L;
    int32_t *id = os_alloc(sizeof(int32_t) * (size_t)(5 * n + 1), "embedding gradient rows");
    int32_t *row = id + n, *uniq = row + n, *start = uniq + n, *order = start + n + 1;
    for (int64_t bi = 0; bi < B; bi++) {
        const int32_t *ids = t->hids + bi * R * L;
        const uint8_t *sp = spliced(t, bi) ? t->speech + bi * L : NULL;
        for (int64_t r = sp ? R - 1 : 0; r < R; r++)   // every row, or a spliced sample's text row
            for (int64_t p = 0; p < L; p++) id[M] = ids[r * L + p], row[M++] = (int32_t)(bi * L + p);
        for (int64_t p = 0; sp && p < L; p++) {   // a spliced sample's audio rows: runs of non-speech positions
            if (sp[p]) continue;
            int64_t e = p;
            while (e < L && !sp[e]) e++;
            for (int64_t r = 0; r < R - 1; r++)
                for (int64_t q = p; q < e; q++) id[M] = ids[r * L + q], row[M++] = (int32_t)(bi * L + q);
            p = e - 1;
        }
    }
    int64_t nu = os_ids_group(id, M, uniq, start, order);
    // [table rows nu][their starts nu + 1][the rows of dx0 that read them, grouped, M]
    int32_t *list = os_alloc(sizeof(int32_t) * (size_t)(2 * nu + 1 + M), "embedding gradient list");
    memcpy(list, uniq, sizeof(int32_t) * (size_t)nu);
    memcpy(list + nu, start, sizeof(int32_t) * (size_t)(nu + 1));
    for (int64_t j = 0; j < M; j++) list[2 * nu + 1 + j] = row[order[j]];
    int32_t *d = os_ids_upload(list, 2 * nu + 1 + M, "embedding gradient list (backend)");
    os_k->embedding_bwd(dE, d, d + nu, d + 2 * nu + 1, dx0, nu, t->C, 1.0f / (float)R);
    os_k->free(d);
    os_free(id), os_free(list);
}

// dproj[src[k]] = (R-1)/R * dx0[pos[k]] (speech_rows): the rows gathered into s, scaled into the zeroed u, then put
// at their rows of dproj (the inverse list: each of dproj's first nd rows its k or -1)
static void splice_bwd(const os_embed_task *t, float *dproj, const float *dx0) {
    int64_t N = t->B * t->L, C = t->C, R = t->R, nd = 0;
    int32_t *h = os_alloc(sizeof(int32_t) * (size_t)(2 * N + 1), "speech splice rows");   // pos, src [N]
    int64_t n = speech_rows(t, h, h + N);
    for (int64_t k = 0; k < n; k++) nd = h[N + k] + 1 > nd ? h[N + k] + 1 : nd;
    int32_t *list = os_alloc(sizeof(int32_t) * (size_t)(n + nd + 1), "speech splice list");   // [pos n][inverse nd]
    memcpy(list, h, sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < nd; i++) list[n + i] = -1;
    for (int64_t k = 0; k < n; k++) list[n + h[N + k]] = (int32_t)k;
    if (n) {
        int32_t *d = os_ids_upload(list, n + nd, "speech splice list (backend)");
        float *s = os_k->alloc((int64_t)sizeof(float) * 2 * n * C, "speech splice rows [2n, C]"), *u = s + n * C;
        os_k->gather_rows(s, dx0, d, n, C);
        os_k->zero(u, n * C);
        os_k->axpy(u, (float)(R - 1) / (float)R, s, n * C);
        os_k->gather_rows(dproj, u, d + n, nd, C);
        os_k->free(d), os_k->free(s);
    }
    os_free(h), os_free(list);
}

void os_embed_bwd(const os_embed_task *t, float *dproj, const float *dx0, float *dE) {
    if (dE) table_bwd(t, dx0, dE);
    if (dproj && t->proj) splice_bwd(t, dproj, dx0);
}
