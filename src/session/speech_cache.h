// --cache_speech_features DIR: the frozen encoder's output per WAV, DIR/<32 hex digits>.safetensors, one F32 tensor
// "encoder_output" [T, d] and the full key in the metadata ("omnishard_key"). The key holds the WAV's resolved
// path, size and modification time, the encoder's identity (its resolved directory and the size and mtime of its
// config and weight files) and the input/output sizes, so a changed file or encoder never reuses stale features.
// The file name is a hash of the key; a file whose stored key differs is a miss and is overwritten.
// Files are written to a temporary name and renamed (never half-written; several ranks may write the same one).
#pragma once
#include <stddef.h>
#include <stdint.h>

// identity of the encoder directory for keys; 0, or -1 + message
int os_feat_cache_encoder_id(const char *enc_dir, char *out, size_t n);
// the key of wav's features (os_free it); NULL + message when wav cannot be stat'ed
char *os_feat_cache_key(const char *wav, const char *enc_id, int64_t n_wave, int64_t T, int64_t d);
// 1 and out[T, d] filled on a hit, 0 on a miss (absent, other key or shape, unreadable file)
int os_feat_cache_read(const char *dir, const char *key, float *out, int64_t T, int64_t d);
// 0, or -1 + message
int os_feat_cache_write(const char *dir, const char *key, const float *x, int64_t T, int64_t d);
