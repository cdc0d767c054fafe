// The speech front end of a session (docs/speech.md), for a training micro-step and for generation alike:
//   WAV -> 16 kHz mono (os_audio_load_16k) -> padded/trimmed to 2 * max_source_positions * 160 samples -> log-mel
//   [n_mels, T_mel] -> frozen Whisper encoder [T_enc, d] (or its cached copy, --cache_speech_features) ->
//   projector [T_s, C], T_s = T_enc / k, which the model's forward splices into the input embedding of the sample's
//   speech positions; the backward gives the projector its gradients (the encoder gets none). The encoder and the
//   projector are the model's (model/whisper.h, model/speech_input.h), their weights read through os_weights.
// Collective schedule: os_speech_fwd gathers every encoder bucket and the projector bucket, and os_speech_bwd
// gathers the projector and opens/closes its gradient scope, in the same order whether or not this rank's
// micro-batch holds speech (design invariant 2).
#pragma once
#include "dataset/dataset.h"
#include "model/omni.h"
#include "model/projector.h"
#include "dataset/batch.h"
#include "model/weights.h"

typedef struct os_speech {
    const os_model *m;
    int on;                 // the model has a speech encoder (else every speech input is an error)
    const char *cache_dir;  // NULL: no feature cache
    char enc_id[4400];      // the encoder's identity in cache keys (its directory and weight files)
    int64_t n_wave, T_mel, T_enc, T_s, n_mels, d, C;
    os_proj_dims pd;
    int64_t B, cap;         // speech input slots of the prepared micro-batch (its rows x K), allocated slots
    int64_t K;              // slots per row: row bi's inputs are slots bi*K + j, in the order of its speech spans
                            // (1 unless packed rows hold several spoken samples, dataset/pack.h)
    int *state;             // [B] 0 no speech, 1 log-mel ready (the encoder runs), 2 encoder output from the cache
    char **key;             // [B] cache key of a state-1 sample (NULL without a cache)
    float *mel;             // [B, n_mels, T_mel] (host: computed here)
    float *stage;           // [T_enc, d] (host): one encoder output read from or written to the cache
    // on the backend's memory (os_k->alloc; docs/design.md "The device seam"):
    float *mel_d;           // [B, n_mels, T_mel] the encoder's input, uploaded by os_speech_fwd
    float *feat;            // [B, T_enc, d] encoder output
    int64_t n_act;          // projector activation floats per position (os_projector_act_floats)
    float *act;             // [B, T_s, n_act] projector activations kept for the backward
    float *proj, *dproj;    // [B, T_s, C] projector output and its gradient
    float *da;              // [T_s, hidden] backward scratch
    int64_t cache_hits, cache_writes;
    int cache_warned;
    void (*write_failed)(void);   // called (once) after the message of a failed cache write; NULL: none (the
                                  // training loop sets it: the run then ends at the step boundary)
} os_speech;

// LLM positions per speech input: T_s = max_source_positions / proj_k (0 when the model has no encoder).
int64_t os_speech_positions(const os_model *m);
// enc_dir: the --speech_encoder directory (NULL when the model has none); cache_dir: --cache_speech_features
// (NULL: off; created when missing). 0, or -1 + message.
int os_speech_init(os_speech *sp, const os_model *m, const char *enc_dir, const char *cache_dir);
void os_speech_free(os_speech *sp);

// Per micro-batch, before os_train_micro: b collated from smp[0..n) (n = 0: an empty micro-batch), index[i] the
// dataset index of smp[i] (for messages). Checks that each sample's speech positions and speech inputs agree
// (T_s positions per input; a packed row: one input per spoken member, os_sample.wavs), reads cached encoder
// outputs, and loads + log-mels the other WAVs. Not collective; -1 + message naming the dataset, the sample and
// the WAV.
int os_speech_prepare(os_speech *sp, const os_batch *b, os_dataset *ds, const os_sample *smp, const int64_t *index,
                      int64_t n);
// As os_speech_prepare, but a sample whose speech input cannot be used does not stop the others: failed(ctx, bi) is
// called with its message (os_errmsg) and its state is 0 (no speech, os_speech_proj NULL). Returns their count.
int64_t os_speech_prepare_each(os_speech *sp, const os_batch *b, os_dataset *ds, const os_sample *smp,
                               const int64_t *index, int64_t n, void (*failed)(void *ctx, int64_t bi), void *ctx);
// Encoder (for state-1 samples; writes their cache files) and projector forward. Collective schedule fixed.
void os_speech_fwd(os_speech *sp, const os_weights *w);
// The projector output [T_s, C] of sample bi (a packed row: [n * T_s, C] for its n inputs, in order); NULL when the
// sample has no speech (sp NULL too). Its first row in sp->proj and in its gradient sp->dproj (filled by the
// embedding backward), or -1.
const float *os_speech_proj(const os_speech *sp, int64_t bi);
int64_t os_speech_proj_row(const os_speech *sp, int64_t bi);
// Projector backward into its gradients through g (whose close the trainer gives the parameter loss terms).
void os_speech_bwd(os_speech *sp, const os_weights *w, const os_grads *g);
