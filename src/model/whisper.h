// The frozen Whisper speech encoder (Hugging Face WhisperEncoder; docs/spec/whisper-frontend.md):
//   mel[n_mels, T_mel] -> conv1 (k 3, pad 1) + GELU -> conv2 (k 3, stride 2, pad 1) + GELU -> x[T, d]
//   + embed_positions[:T] -> nlayers pre-LN blocks:  x += out_proj(attn(q(ln1 x), k(ln1 x), v(ln1 x)))
//                                                     x += fc2(gelu(fc1(ln2 x)))
//   -> final LayerNorm -> out[T, d],  T = (T_mel - 1) / 2 + 1 <= max_source_positions.
// Attention has no mask (every frame sees every frame), scale 1/sqrt(d/H); k_proj has no bias; LayerNorm eps 1e-5;
// GELU is the exact erf form. The parameters live in the model's registry as NON-trainable buckets (one for
// conv1/conv2/positions, one per block, one for the final LayerNorm) under the Hugging Face names
// "encoder.conv1.weight", ..., so the sharding runtime shards them at stage 3 like any module, with no
// gradients and no optimizer state.
#pragma once
#include "io/hfconfig.h"
#include "io/safetensors.h"
#include "model/load.h"
#include "model/params.h"
#include "model/weights.h"
#include <stdint.h>

typedef struct {
    int ln1_w, ln1_b, q_w, q_b, k_w, v_w, v_b, o_w, o_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
} os_whisper_layer_ids;

typedef struct {
    os_whisper_config cfg;
    int64_t d, H, F, n_mels, n_pos, nlayers;   // d_model, heads, ffn, mel bins, max_source_positions, blocks
    int conv1_w, conv1_b, conv2_w, conv2_b, pos, lnf_w, lnf_b;   // parameter ids
    os_whisper_layer_ids *layer;
    int b_front, *b_layer, b_final;   // bucket ids: b_front is the encoder's first bucket, b_final its last
} os_whisper;                          // all zero (nlayers 0, d 0): no encoder declared

// Declare the encoder's buckets and parameters at the end of r. 0, or -1 + message.
int os_whisper_declare(os_whisper *w, os_registry *r, const os_whisper_config *c);
void os_whisper_free(os_whisper *w);

// Input lengths. The waveform is padded or trimmed to 2 * max_source_positions * 160 samples (480000 = 30 s for
// real Whisper), giving 2 * max_source_positions mel frames and max_source_positions encoder frames.
int64_t os_whisper_wave_samples(const os_whisper *w);
int64_t os_whisper_mel_frames(const os_whisper *w);
int64_t os_whisper_out_frames(int64_t T_mel);   // (T_mel - 1) / 2 + 1

// How the directory's checkpoint names the encoder: "encoder.*" (WhisperModel), "model.encoder.*"
// (WhisperForConditionalGeneration) or bare "conv1.weight", ... (a saved WhisperEncoder). Sets *map to read the
// registry's "encoder.X" names from it. -1 + message when no layout matches.
int os_whisper_name_map(const os_st_dir *d, const char *dir, os_name_map *map);

// Forward of n inputs: mel[i] [n_mels, T_mel] -> out[i] [T, d] (both on the backend's memory). Gathers each encoder bucket once through wt (and
// releases it), in the same order whatever n is, n = 0 included: the collective schedule depends on the model only.
// T_mel must satisfy os_whisper_out_frames(T_mel) <= max_source_positions (checked by the caller).
void os_whisper_fwd(const os_whisper *w, const os_weights *wt, int64_t n, const float *const *mel, int64_t T_mel,
                    float *const *out);
