// Audio input for the speech path: any file libsndfile reads (WAV, FLAC, OGG, AIFF, ...) -> 16 kHz mono float.
// Down-mix: mean of the channels. Resampling: Kaiser-windowed sinc (docs/audio.md gives its pass-band and
// stop-band); a 16 kHz file passes through untouched, and 16-bit PCM becomes exactly int16 / 32768.
#pragma once
#include <stdint.h>

#define OS_AUDIO_RATE 16000
#define OS_AUDIO_N_SAMPLES 480000   // 30 s at 16 kHz: what Whisper's encoder takes

// Reads `path` into *samples [*n] (16 kHz mono, os_alloc'ed: the caller os_free()s it).
// Returns 0, or -1 with os_errmsg() naming the file (missing, not audio, no samples, unsupported rate).
int os_audio_load_16k(const char *path, float **samples, int64_t *n);
// The checks of os_audio_load_16k that need only the header (file exists, not empty, a format libsndfile reads,
// frames, channels and rate in range), without decoding: 0, or -1 with the same messages.
int os_audio_check(const char *path);

// Resamples x[n] at rate_in Hz to 16 kHz: *out [*n_out] (os_alloc'ed), n_out = ceil(n * 16000 / rate_in).
// Output sample i is the band-limited signal at time i / 16000 s (no delay). Returns -1 on a rate outside
// [1000, 768000] Hz.
int os_audio_resample_16k(const float *x, int64_t n, int rate_in, float **out, int64_t *n_out);

// out[480000] = x[n] truncated to 30 s, or zero-padded on the right (Whisper's pad_or_trim).
void os_audio_pad_or_trim(const float *x, int64_t n, float *out);
