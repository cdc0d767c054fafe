// Fuzz target: a safetensors file (src/io/safetensors.c): open it, then read the first and last element of every
// tensor through the converters a model load uses.
#include "core/err.h"
#include "fuzz.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    os_st_file *f = os_st_open(fuzz_file(data, size, "model.safetensors"));
    if (!f) return 0;
    (void)os_st_metadata(f, "format");
    for (int i = 0; i < os_st_count(f); i++) {
        const os_st_tensor *t = os_st_at(f, i);
        if (os_st_find(f, t->name) != t) os_die("fuzz: tensor %d is not found by its name", i);
        float x;
        int64_t v;
        int64_t last = t->numel ? t->numel - 1 : 0;
        if (t->numel && os_st_read_f32(t, 0, 1, &x) < 0) (void)os_st_read_i64(t, 0, 1, &v);
        if (t->numel && os_st_read_f32(t, last, 1, &x) < 0) (void)os_st_read_i64(t, last, 1, &v);
    }
    os_st_close(f);
    return 0;
}
