// Fuzz target: an audio file (src/audio/audio.c): the header check, then the decode to 16 kHz mono.
#include "core/alloc.h"
#include "audio/audio.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, "speech.wav");
    if (os_audio_check(path) < 0) return 0;
    float *x = NULL;
    int64_t n = 0;
    if (os_audio_load_16k(path, &x, &n) == 0) os_free(x);
    return 0;
}
