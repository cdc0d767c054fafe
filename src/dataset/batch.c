#include "dataset/batch.h"
#include "core/alloc.h"
#include "core/err.h"
#include <string.h>

void os_batch_alloc(os_batch *b, int64_t B, int64_t R, int64_t L) {
    memset(b, 0, sizeof *b);
    b->B = B, b->R = R, b->L = L;
    b->ids = os_alloc(sizeof(int32_t) * (size_t)(B * R * L), "batch ids");
    b->labels = os_alloc(sizeof(int32_t) * (size_t)(B * R * L), "batch labels");
    b->keymask = os_alloc((size_t)(B * L), "batch mask");
    b->speech = os_alloc((size_t)(B * L), "batch speech mask");
}

void os_batch_free(os_batch *b) {
    os_free(b->ids), os_free(b->labels), os_free(b->keymask), os_free(b->speech), os_free(b->seg), os_free(b->pos);
    memset(b, 0, sizeof *b);
}

// seg/pos of row i (sample s, no left padding in a packed row): padding is segment -1
static void collate_segments(os_batch *b, int64_t i, const os_sample *s) {
    int32_t *seg = b->seg + i * b->L, *pos = b->pos + i * b->L;
    for (int64_t p = 0; p < b->L; p++) {
        seg[p] = p < s->L ? (s->seg ? s->seg[p] : 0) : -1;
        pos[p] = p > 0 && seg[p] == seg[p - 1] ? pos[p - 1] + 1 : 0;
    }
}

void os_collate(os_batch *b, const os_sample *s, int64_t n, int32_t pad_id) {
    int64_t lead = 0, tail = 0, R = n ? s[0].R : 1;
    for (int64_t i = 0; i < n; i++) {
        if (s[i].lead > lead) lead = s[i].lead;
        if (s[i].L - s[i].lead > tail) tail = s[i].L - s[i].lead;
    }
    int64_t L = lead + tail;
    os_batch_alloc(b, n, R, L);
    int packed = 0;
    for (int64_t i = 0; i < n; i++) packed |= s[i].seg != NULL;
    if (packed) {
        b->seg = os_alloc(sizeof(int32_t) * (size_t)(n * L), "batch segments");
        b->pos = os_alloc(sizeof(int32_t) * (size_t)(n * L), "batch positions");
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t shift = lead - s[i].lead;   // left padding of this sample
        for (int64_t r = 0; r < R; r++)
            for (int64_t p = 0; p < L; p++) {
                int64_t q = p - shift, o = (i * R + r) * L + p;
                int in = q >= 0 && q < s[i].L;
                b->ids[o] = in ? s[i].ids[r * s[i].L + q] : pad_id;
                b->labels[o] = in ? s[i].labels[r * s[i].L + q] : -100;
            }
        for (int64_t p = 0; p < L; p++) {
            int64_t q = p - shift;
            int in = q >= 0 && q < s[i].L;
            b->keymask[i * L + p] = (uint8_t)in;
            b->speech[i * L + p] = (uint8_t)(in && s[i].speech ? s[i].speech[q] : 0);
        }
        if (packed) collate_segments(b, i, &s[i]);
    }
}

int os_batch_check(const os_batch *b, const os_batch_vocab *v) {
    int64_t G = v->G, R = G > 0 ? G + 1 : 1, T = v->T, A = v->A;
    if (b->R != R) return os_errf("batch has %lld rows per sample, the model needs %lld (G+1)", (long long)b->R, (long long)R);
    for (int64_t bi = 0; bi < b->B; bi++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t p = 0; p < b->L; p++) {
                int64_t i = (bi * R + r) * b->L + p;
                int32_t id = b->ids[i], lb = b->labels[i];
                if (id < 0 || id >= v->V)
                    return os_errf("sample %lld row %lld position %lld: input id %d outside the vocabulary [0, %lld)",
                                   (long long)bi, (long long)r, (long long)p, id, (long long)v->V);
                int64_t lim = (G > 0 && r < G) ? A : T;
                if (lb != -100 && (lb < 0 || lb >= lim))
                    return os_errf("sample %lld row %lld position %lld: label %d outside [0, %lld) (or -100)",
                                   (long long)bi, (long long)r, (long long)p, lb, (long long)lim);
            }
    return 0;
}
