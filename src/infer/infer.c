// omnishard infer's generation loop (infer.h): one forward per step (gen_forward.h), rank 0 picks, every rank follows.
#include "infer/infer.h"
#include "infer/gen_forward.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "dataset/slam_dataset.h"
#include "kernels/kernels.h"
#include "zero/comm.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

// a one-record view for the speech front end: wav_index 0 is the prompt's WAV
typedef struct {
    os_dataset base;
    const char *wav;
} wav_view;

static const char *view_wav(os_dataset *d, int64_t i) {
    return i == 0 ? ((wav_view *)d)->wav : NULL;
}

// every rank learns whether any failed; the ranks that did not fail get a message too
static int agree(int rc) {
    int failed = comm_any_failed(rc < 0);
    if (failed && rc == 0) os_err_echo("stopping: %d other rank(s) reported an error", failed);
    return failed ? -1 : 0;
}

// audio logits [G, A] from the lm_head logits z[V]: without the adapter (G = 1, layer shift) z[T : T+G*A] (layer g:
// its own columns with layer shift, else G = 1); with it the adapter Wa [G*A, A] @ z[T:T+A] + ba (one sgemm, as the
// training head's k_gemm) into out[G*A]
static const float *audio_logits(const os_model *m, const float *z, const float *Wa, const float *ba, float *out) {
    int64_t T = m->oc.text_vocab, A = m->oc.audio_vocab, G = m->oc.G;
    if (!Wa) return z + T;
    k_linear_fwd(out, z + T, Wa, ba, 1, A, G * A);
    return out;
}

// the codec stream: audio [G, n] row-major after the first `latency` positions (codec_utils.py:74) up to the first
// eoa, special ids left out
static void codec_stream(os_gen_result *r, int64_t G, int64_t A, int64_t latency) {
    r->codec = os_alloc(sizeof(int32_t) * (size_t)(G * r->naudio + 1), "codec stream");
    for (int64_t t = latency; t < r->naudio; t++)
        for (int64_t g = 0; g < G; g++) {
            int32_t a = r->audio[g * r->naudio + t];
            if (a == os_eoa(A)) return;
            if (a < os_eoa(A)) r->codec[r->ncodec++] = a;
        }
}

int os_generate(os_session *s, const os_infer_prompt *p, const os_gen_opts *o, os_gen_result *r) {
    const os_model *m = &s->model;
    int64_t G = m->oc.G, R = G + 1, T = m->oc.text_vocab, A = m->oc.audio_vocab, N = o->max_new_tokens;
    int64_t cap = p->L + N;
    int rank0 = comm_rank() == 0;
    memset(r, 0, sizeof *r);
    if (p->R != R) return os_errf("the prompt has %lld rows, the model needs %lld (G+1)", (long long)p->R, (long long)R);

    // speech front end: the WAV is read and log-mel'd once; the encoder runs at the first forward only
    wav_view view = {.base = {.n = 1, .path = "the spoken question", .wav_path = view_wav}, .wav = p->wav};
    if (s->trainer.speech || p->wav) {
        os_batch b;
        os_batch_alloc(&b, 1, R, p->L);
        if (p->speech) memcpy(b.speech, p->speech, (size_t)p->L);
        os_sample smp = {.R = R, .L = p->L, .wav_index = p->wav ? 0 : -1};
        int64_t index = 0;
        int rc = agree(os_speech_prepare(&s->speech, &b, &view.base, &smp, &index, 1));
        os_batch_free(&b);
        if (rc < 0) return -1;
    }

    // the adapter's weights, on rank 0 (gathered once; every rank takes part at ZeRO-3)
    float *ad = NULL;
    const float *Wa = NULL, *ba = NULL;
    if (m->b_adapter >= 0) {
        ad = os_alloc(sizeof(float) * (size_t)m->reg.b[m->b_adapter].numel, "adapter weights");
        zr_read_bucket(&s->rt, m->b_adapter, ad);
        if (!rank0) os_free(ad), ad = NULL;
        else Wa = ad + s->rt.reg->p[m->adapter_w].offset, ba = ad + s->rt.reg->p[m->adapter_b].offset;
    }
    float *al = rank0 ? os_alloc(sizeof(float) * (size_t)(G * A), "audio logits") : NULL;
    os_choice_work cw = {0};
    if (rank0) os_choice_work_init(&cw, T > A ? T : A);
    uint64_t key = os_hash_str("omnishard infer sampling", o->seed);

    int32_t *seq = os_alloc(sizeof(int32_t) * (size_t)(R * cap), "sequence");
    for (int64_t q = 0; q < R; q++) memcpy(seq + q * cap, p->ids + q * p->L, sizeof(int32_t) * (size_t)p->L);
    r->text = os_alloc(sizeof(int32_t) * (size_t)(N + 1), "text ids");
    r->audio = os_alloc(sizeof(int32_t) * (size_t)(G * N + 1), "audio ids");
    int32_t *gen = os_alloc(sizeof(int32_t) * (size_t)(G * N + 1), "audio ids by step");   // [N, G]
    int audio_end = o->text_only || p->asr;
    int64_t L = p->L;
    os_gen_fwd fw;
    os_gen_fwd_init(&fw, s, R, p->L, p->speech, cap, o->kv_cache);
    for (int64_t step = 0; step < N; step++) {
        const float *z = os_gen_fwd_next(&fw, seq, L);
        int32_t tok[OS_MAX_G + 1];   // [0, G) audio (raw), G text
        if (rank0) {
            uint64_t ctr = (uint64_t)step * (uint64_t)R;
            int predict = !audio_end && step >= m->oc.latency;
            const float *xa = predict ? audio_logits(m, z, Wa, ba, al) : NULL;   // [G, A]
            tok[G] = r->text_end ? os_pad_t(T)
                                 : os_choose(z, T, r->text, r->ntext, 1, o->text_penalty, &o->choice,
                                             os_rng_uniform(key, ctr + (uint64_t)G), &cw);
            for (int64_t g = 0; g < G; g++)   // the first `latency` steps hold the audio back (slam_model_s2s.py:412)
                tok[g] = !predict ? os_pad_a(A)
                                  : os_choose(xa + g * A, A, gen + g, r->naudio, G, o->audio_penalty, &o->choice,
                                              os_rng_uniform(key, ctr + (uint64_t)g), &cw);
        }
        comm_bcast(tok, (int64_t)sizeof(int32_t) * R, 0);
        r->steps = step + 1;
        if (!r->text_end) {
            if (tok[G] == os_eot(T)) r->text_end = 1;
            else r->text[r->ntext++] = tok[G];
        }
        if (!audio_end) {
            for (int64_t g = 0; g < G; g++) {
                gen[r->naudio * G + g] = tok[g];
                audio_end |= tok[g] == os_eoa(A);
            }
            r->naudio++;
            r->audio_end = audio_end;
        }
        if (r->text_end && audio_end) break;
        for (int64_t g = 0; g < G; g++) seq[g * cap + L] = os_audio_token(&m->oc, g, tok[g]);
        seq[G * cap + L] = tok[G];
        L++;
    }
    for (int64_t g = 0; g < G; g++)
        for (int64_t t = 0; t < r->naudio; t++) r->audio[g * r->naudio + t] = gen[t * G + g];
    codec_stream(r, G, A, m->oc.latency);
    r->positions = fw.positions;
    os_gen_fwd_free(&fw);
    os_free(gen), os_free(seq), os_free(al), os_free(ad);
    if (rank0) os_choice_work_free(&cw);
    return 0;
}

void os_gen_result_free(os_gen_result *r) {
    os_free(r->text), os_free(r->audio), os_free(r->codec);
    memset(r, 0, sizeof *r);
}
