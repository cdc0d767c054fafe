#include "session/speech.h"
#include "core/alloc.h"
#include "core/err.h"
#include "audio/audio.h"
#include "audio/logmel.h"
#include "io/atomic.h"
#include "kernels/ops.h"
#include "model/speech_input.h"
#include "session/speech_cache.h"
#include <string.h>

int64_t os_speech_positions(const os_model *m) {
    return m->enc.nlayers > 0 ? m->enc.n_pos / m->oc.proj_k : 0;
}

int os_speech_init(os_speech *sp, const os_model *m, const char *enc_dir, const char *cache_dir) {
    memset(sp, 0, sizeof *sp);
    sp->m = m, sp->K = 1;
    sp->on = m->enc.nlayers > 0 && m->b_proj >= 0;
    if (!sp->on) return 0;
    const os_whisper *w = &m->enc;
    sp->n_wave = os_whisper_wave_samples(w), sp->T_mel = os_whisper_mel_frames(w);
    sp->T_enc = os_whisper_out_frames(sp->T_mel), sp->T_s = os_speech_positions(m);
    sp->n_mels = w->n_mels, sp->d = w->d, sp->C = m->C;
    sp->pd = os_model_proj_dims(m);
    sp->n_act = os_projector_act_floats(&sp->pd);
    if (sp->T_s < 1)
        return os_errf("%s: max_source_positions %lld gives no LLM position with %lld frames per projector output",
                       enc_dir, (long long)w->n_pos, (long long)m->oc.proj_k);
    if (cache_dir) {
        if (os_mkdir_p(cache_dir) < 0) return os_err_ctx("--cache_speech_features");
        if (os_feat_cache_encoder_id(enc_dir, sp->enc_id, sizeof sp->enc_id) < 0) return -1;
        sp->cache_dir = cache_dir;
    }
    sp->da = os_k->alloc((int64_t)sizeof(float) * sp->T_s * os_projector_scratch_floats(&sp->pd), "projector backward scratch");
    sp->stage = os_alloc(sizeof(float) * (size_t)(sp->T_enc * sp->d), "speech encoder output (host)");
    return 0;
}

static void free_slots(os_speech *sp) {
    for (int64_t i = 0; sp->key && i < sp->cap; i++) os_free(sp->key[i]);
    os_free(sp->key), os_free(sp->state), os_free(sp->mel);
    os_k->free(sp->mel_d), os_k->free(sp->feat), os_k->free(sp->act), os_k->free(sp->proj), os_k->free(sp->dproj);
    sp->key = NULL, sp->state = NULL, sp->mel = sp->mel_d = sp->feat = sp->act = sp->proj = sp->dproj = NULL;
    sp->cap = 0;
}

void os_speech_free(os_speech *sp) {
    free_slots(sp);
    os_k->free(sp->da), os_free(sp->stage);
    memset(sp, 0, sizeof *sp);
}

static void ensure_slots(os_speech *sp, int64_t B) {
    if (B <= sp->cap) {
        for (int64_t i = 0; i < sp->cap; i++) os_free(sp->key[i]), sp->key[i] = NULL;
        return;
    }
    free_slots(sp);
    sp->cap = B;
    sp->key = os_alloc(sizeof(char *) * (size_t)B, "speech cache keys");
    sp->state = os_alloc(sizeof(int) * (size_t)B, "speech states");
    sp->mel = os_alloc(sizeof(float) * (size_t)(B * sp->n_mels * sp->T_mel), "speech log-mel");
    sp->mel_d = os_k->alloc((int64_t)sizeof(float) * B * sp->n_mels * sp->T_mel, "speech log-mel (backend)");
    sp->feat = os_k->alloc((int64_t)sizeof(float) * B * sp->T_enc * sp->d, "speech encoder output");
    sp->act = os_k->alloc((int64_t)sizeof(float) * B * sp->T_s * sp->n_act, "projector activations");
    sp->proj = os_k->alloc((int64_t)sizeof(float) * B * sp->T_s * sp->C, "projector output");
    sp->dproj = os_k->alloc((int64_t)sizeof(float) * B * sp->T_s * sp->C, "projector output gradient");
}

// WAV -> 16 kHz -> padded or trimmed to n_wave samples -> log-mel into mel[n_mels, T_mel]
static int wav_to_mel(const os_speech *sp, const char *wav, float *mel) {
    float *x = NULL;
    int64_t n = 0;
    if (os_audio_load_16k(wav, &x, &n) < 0) return -1;
    float *pad = os_alloc(sizeof(float) * (size_t)sp->n_wave, "padded speech input");
    memcpy(pad, x, sizeof(float) * (size_t)(n < sp->n_wave ? n : sp->n_wave));   // the rest stays zero
    os_free(x);
    int rc = os_log_mel(pad, sp->n_wave, (int)sp->n_mels, mel);
    os_free(pad);
    return rc;
}

// the speech inputs of sample s (wav indices into w[], at most max); returns their count
static int64_t inputs(const os_sample *s, int64_t *w, int64_t max) {
    if (s->nwavs > 0) {
        for (int64_t j = 0; j < s->nwavs && j < max; j++) w[j] = s->wavs[j];
        return s->nwavs;
    }
    w[0] = s->wav_index;
    return s->wav_index >= 0;
}

// row bi's input j (wav: its path) into slot s: the cached encoder output, or the log-mel; who names the sample
static int prepare_slot(os_speech *sp, int64_t s, const char *wav, os_dataset *ds, long long who) {
    float *feat = sp->feat + s * sp->T_enc * sp->d;
    if (sp->cache_dir) {
        sp->key[s] = os_feat_cache_key(wav, sp->enc_id, sp->n_wave, sp->T_enc, sp->d);
        if (!sp->key[s]) return os_err_ctx("%s: sample %lld: speech input", ds->path, who);
        if (os_feat_cache_read(sp->cache_dir, sp->key[s], sp->stage, sp->T_enc, sp->d)) {
            os_k->upload(feat, sp->stage, (int64_t)sizeof(float) * sp->T_enc * sp->d);
            sp->state[s] = 2, sp->cache_hits++;
            return 0;
        }
    }
    if (wav_to_mel(sp, wav, sp->mel + s * sp->n_mels * sp->T_mel) < 0)
        return os_err_ctx("%s: sample %lld: speech input", ds->path, who);
    sp->state[s] = 1;
    return 0;
}

// row bi's speech inputs (wv: scratch for their wav indices, K of them): checked against its speech positions,
// then each prepared into its slot bi*K + j; -1 + message
static int prepare_row(os_speech *sp, const os_batch *b, os_dataset *ds, const os_sample *smp, const int64_t *index,
                       int64_t n, int64_t bi, int64_t *wv) {
    int64_t K = sp->K, npos = 0, nw = bi < n ? inputs(&smp[bi], wv, K) : 0;
    for (int64_t p = 0; b->speech && p < b->L; p++) npos += b->speech[bi * b->L + p];
    const char *wav = nw && ds->wav_path ? ds->wav_path(ds, wv[0]) : NULL;
    long long who = bi < n && index ? (long long)index[bi] : (long long)bi;
    int rc = 0;
    if (!npos && !wav) return 0;
    if (!sp->on)
        rc = os_errf("%s: sample %lld: has a speech input%s%s but the model has no speech encoder (--speech_encoder DIR)",
                     ds->path, who, wav ? " " : "", wav ? wav : "");
    else if (!wav)
        rc = os_errf("%s: sample %lld: %lld speech positions but no speech input (WAV)", ds->path, who, (long long)npos);
    else if (npos != sp->T_s * nw)
        rc = os_errf("%s: sample %lld: speech input%s '%s' fill%s %lld positions, the encoder gives %lld "
                     "(max_source_positions / %lld%s)", ds->path, who, nw > 1 ? "s" : "", wav, nw > 1 ? "" : "s",
                     (long long)npos, (long long)(sp->T_s * nw), (long long)sp->pd.k, nw > 1 ? " per input" : "");
    for (int64_t j = 0; rc == 0 && j < nw; j++) {
        const char *wj = ds->wav_path(ds, wv[j]);
        rc = wj ? prepare_slot(sp, bi * K + j, wj, ds, who)
                : os_errf("%s: sample %lld: speech input %lld has no WAV", ds->path, who, (long long)j);
    }
    return rc;
}

// os_speech_prepare (each NULL: stops at the first failing row) and os_speech_prepare_each; the failing rows' count
static int64_t prepare_all(os_speech *sp, const os_batch *b, os_dataset *ds, const os_sample *smp,
                           const int64_t *index, int64_t n, void (*each)(void *ctx, int64_t bi), void *ctx) {
    int64_t K = 1, w[1];
    for (int64_t bi = 0; bi < n && bi < b->B; bi++) K = smp[bi].nwavs > K ? smp[bi].nwavs : K;
    if (sp->on) ensure_slots(sp, b->B * K);
    sp->B = b->B * K, sp->K = K;
    for (int64_t s = 0; sp->on && s < sp->B; s++) sp->state[s] = 0;
    int64_t *wv = K > 1 ? os_alloc(sizeof(int64_t) * (size_t)K, "a row's speech inputs") : w, bad = 0;
    for (int64_t bi = 0; bi < b->B && (each || !bad); bi++) {
        if (prepare_row(sp, b, ds, smp, index, n, bi, wv) == 0) continue;
        bad++;
        for (int64_t s = bi * K; each && sp->on && s < (bi + 1) * K; s++) sp->state[s] = 0;   // the row: no speech
        if (each) each(ctx, bi);
    }
    if (wv != w) os_free(wv);
    return bad;
}

int os_speech_prepare(os_speech *sp, const os_batch *b, os_dataset *ds, const os_sample *smp, const int64_t *index,
                      int64_t n) {
    return prepare_all(sp, b, ds, smp, index, n, NULL, NULL) ? -1 : 0;
}

int64_t os_speech_prepare_each(os_speech *sp, const os_batch *b, os_dataset *ds, const os_sample *smp,
                               const int64_t *index, int64_t n, void (*failed)(void *ctx, int64_t bi), void *ctx) {
    return prepare_all(sp, b, ds, smp, index, n, failed, ctx);
}

void os_speech_fwd(os_speech *sp, const os_weights *w) {
    const os_model *m = sp->m;
    OS_ASSERT(sp->on);
    // encoder for the samples without cached features (every bucket gathered even when there are none)
    const float **mel = os_alloc(sizeof(float *) * (size_t)(sp->B + 1), "encoder inputs");
    float **out = os_alloc(sizeof(float *) * (size_t)(sp->B + 1), "encoder outputs");
    int64_t k = 0, first = -1, last = -1, per = sp->n_mels * sp->T_mel;
    for (int64_t bi = 0; bi < sp->B; bi++)
        if (sp->state[bi] == 1) {
            first = first < 0 ? bi : first, last = bi;
            mel[k] = sp->mel_d + bi * per;
            out[k++] = sp->feat + bi * sp->T_enc * sp->d;   // consecutive slots: one block, the encoder runs in it
        }
    if (k)   // one upload: the slots from the first to the last input (those between, unread, come along)
        os_k->upload(sp->mel_d + first * per, sp->mel + first * per, (int64_t)sizeof(float) * (last - first + 1) * per);
    os_whisper_fwd(&m->enc, w, k, (const float *const *)mel, sp->T_mel, (float *const *)out);
    os_free(mel), os_free(out);
    for (int64_t bi = 0; sp->cache_dir && bi < sp->B; bi++) {
        if (sp->state[bi] != 1) continue;
        // a failed cache write ends a training run at the step boundary (every output is checked, docs/operations.md)
        os_k->download(sp->stage, sp->feat + bi * sp->T_enc * sp->d, (int64_t)sizeof(float) * sp->T_enc * sp->d);
        if (os_feat_cache_write(sp->cache_dir, sp->key[bi], sp->stage, sp->T_enc, sp->d) < 0) {
            if (!sp->cache_warned++) {
                os_err_ctx("--cache_speech_features");
                if (sp->write_failed) sp->write_failed();
            }
        } else
            sp->cache_writes++;
    }
    os_projector_forward(m, w, sp->B, sp->state, sp->feat, sp->T_enc, sp->T_s, sp->act, sp->proj);   // projector
}

int64_t os_speech_proj_row(const os_speech *sp, int64_t bi) {
    int64_t s = sp ? bi * sp->K : 0;   // the row's first slot
    return sp && sp->on && s < sp->B && sp->state[s] ? s * sp->T_s : -1;
}

const float *os_speech_proj(const os_speech *sp, int64_t bi) {
    int64_t r = os_speech_proj_row(sp, bi);
    return r < 0 ? NULL : sp->proj + r * sp->C;
}

void os_speech_bwd(os_speech *sp, const os_weights *w, const os_grads *g) {
    os_projector_backward(sp->m, w, g, sp->B, sp->state, sp->feat, sp->T_enc, sp->T_s, sp->act, sp->dproj, sp->da);
}
