#include "dataset/batch.h"
#include "core/alloc.h"
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
    os_free(b->ids), os_free(b->labels), os_free(b->keymask), os_free(b->speech);
    memset(b, 0, sizeof *b);
}
