// omnishard infer's generation loop (infer.h): one forward per step (gen_forward.h), rank 0 picks, every rank follows.
#include "infer/infer.h"
#include "infer/gen_forward.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "dataset/slam_dataset.h"
#include "kernels/kernels.h"
#include "zero/comm.h"
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

// the speech front end: the WAV is read and log-mel'd once (the encoder runs at the first forward only)
static int prepare_speech(os_session *s, const os_infer_prompt *p, int local) {
    if (!s->speech.on && !p->wav) return 0;
    wav_view view = {.base = {.n = 1, .path = "the spoken question", .wav_path = view_wav}, .wav = p->wav};
    os_batch b;
    os_batch_alloc(&b, 1, p->R, p->L);
    if (p->speech) memcpy(b.speech, p->speech, (size_t)p->L);
    os_sample smp = {.R = p->R, .L = p->L, .wav_index = p->wav ? 0 : -1};
    int64_t index = 0;
    int rc = os_speech_prepare(&s->speech, &b, &view.base, &smp, &index, 1);
    if (!local) rc = agree(rc);
    os_batch_free(&b);
    return rc;
}

// what one generation carries from step to step
typedef struct {
    const os_model *m;
    const os_gen_opts *o;
    int64_t G, T, A;
    int chooser;                // this rank picks the tokens (rank 0, or every rank decoding alone)
    float *ad;                  // the adapter bucket on the chooser (NULL: none, or another rank)
    const float *Wa, *ba;       //   its weight [G*A, A] and bias [G*A]
    float *al;                  // [G*A] audio logits (rank 0)
    os_choice_work cw;          // rank 0
    uint64_t key;               // sampling stream
    int32_t *gen;               // [N, G] audio ids by step
    int audio_end;
} gen_state;

static void state_init(gen_state *g, os_session *s, const os_infer_prompt *p, const os_gen_opts *o) {
    const os_model *m = &s->model;
    memset(g, 0, sizeof *g);
    g->m = m, g->o = o, g->G = m->oc.G, g->T = m->oc.text_vocab, g->A = m->oc.audio_vocab;
    g->audio_end = o->text_only || p->asr;
    g->key = os_hash_str("omnishard infer sampling", o->seed);
    g->chooser = o->local || comm_rank() == 0;
    g->gen = os_alloc(sizeof(int32_t) * (size_t)(g->G * o->max_new_tokens + 1), "audio ids by step");
    if (m->b_adapter >= 0) {   // gathered once (every rank takes part at ZeRO-3), kept on the chooser
        g->ad = os_alloc(sizeof(float) * (size_t)m->reg.b[m->b_adapter].numel, "adapter weights");
        zr_read_bucket(&s->rt, m->b_adapter, g->ad);
        if (!g->chooser) os_free(g->ad), g->ad = NULL;
        else g->Wa = g->ad + s->rt.reg->p[m->adapter_w].offset, g->ba = g->ad + s->rt.reg->p[m->adapter_b].offset;
    }
    if (!g->chooser) return;
    g->al = os_alloc(sizeof(float) * (size_t)(g->G * g->A), "audio logits");
    os_choice_work_init(&g->cw, g->T > g->A ? g->T : g->A);
}

static void state_free(gen_state *g) {
    os_free(g->gen), os_free(g->ad), os_free(g->al);
    os_choice_work_free(&g->cw);
}

// rank 0: the tokens of `step` from the last position's logits z: tok[0, G) raw audio ids, tok[G] the text id
static void choose_tokens(gen_state *g, const os_gen_result *r, const float *z, int64_t step, int32_t *tok) {
    int64_t G = g->G, A = g->A;
    uint64_t ctr = (uint64_t)step * (uint64_t)(G + 1);
    const os_gen_opts *o = g->o;
    int predict = !g->audio_end && step >= g->m->oc.latency;   // latency steps hold the audio back (:412)
    const float *xa = predict ? audio_logits(g->m, z, g->Wa, g->ba, g->al) : NULL;   // [G, A]
    tok[G] = r->text_end ? os_pad_t(g->T)
                         : os_choose(z, g->T, r->text, r->ntext, 1, o->text_penalty, &o->choice,
                                     os_rng_uniform(g->key, ctr + (uint64_t)G), &g->cw);
    for (int64_t k = 0; k < G; k++)
        tok[k] = !predict ? os_pad_a(A)
                          : os_choose(xa + k * A, A, g->gen + k, r->naudio, G, o->audio_penalty, &o->choice,
                                      os_rng_uniform(g->key, ctr + (uint64_t)k), &g->cw);
}

// every rank: the step's tokens into r; 1 when both streams have ended
static int record(gen_state *g, os_gen_result *r, const int32_t *tok, int64_t step) {
    int64_t G = g->G;
    r->steps = step + 1;
    if (!r->text_end) {
        if (tok[G] == os_eot(g->T)) r->text_end = 1;
        else r->text[r->ntext++] = tok[G];
    }
    if (!g->audio_end) {
        for (int64_t k = 0; k < G; k++) {
            g->gen[r->naudio * G + k] = tok[k];
            g->audio_end |= tok[k] == os_eoa(g->A);
        }
        r->naudio++;
        r->audio_end = g->audio_end;
    }
    return r->text_end && g->audio_end;
}

int os_generate(os_session *s, const os_infer_prompt *p, const os_gen_opts *o, os_gen_result *r) {
    const os_model *m = &s->model;
    int64_t G = m->oc.G, R = G + 1, N = o->max_new_tokens, cap = p->L + N;
    memset(r, 0, sizeof *r);
    if (p->R != R) return os_errf("the prompt has %lld rows, the model needs %lld (G+1)", (long long)p->R, (long long)R);
    if (prepare_speech(s, p, o->local) < 0) return -1;
    gen_state g;
    state_init(&g, s, p, o);
    int32_t *seq = os_alloc(sizeof(int32_t) * (size_t)(R * cap), "sequence");   // [R, cap]
    for (int64_t q = 0; q < R; q++) memcpy(seq + q * cap, p->ids + q * p->L, sizeof(int32_t) * (size_t)p->L);
    r->text = os_alloc(sizeof(int32_t) * (size_t)(N + 1), "text ids");
    r->audio = os_alloc(sizeof(int32_t) * (size_t)(G * N + 1), "audio ids");
    os_gen_fwd fw;
    os_gen_fwd_init(&fw, s, R, p->L, p->speech, cap, o->kv_cache);
    for (int64_t step = 0, L = p->L; step < N; step++, L++) {
        const float *z = os_gen_fwd_next(&fw, seq, L);
        int32_t tok[OS_MAX_G + 1];
        if (g.chooser) choose_tokens(&g, r, z, step, tok);
        if (!o->local) comm_bcast(tok, (int64_t)sizeof(int32_t) * R, 0);   // every rank appends the same position
        if (record(&g, r, tok, step)) break;
        for (int64_t k = 0; k < G; k++) seq[k * cap + L] = os_audio_token(&m->oc, k, tok[k]);
        seq[G * cap + L] = tok[G];
    }
    for (int64_t k = 0; k < G; k++)
        for (int64_t t = 0; t < r->naudio; t++) r->audio[k * r->naudio + t] = g.gen[t * G + k];
    codec_stream(r, G, m->oc.audio_vocab, m->oc.latency);
    r->positions = fw.positions;
    os_gen_fwd_free(&fw);
    os_free(seq);
    state_free(&g);
    return 0;
}

void os_gen_result_free(os_gen_result *r) {
    os_free(r->text), os_free(r->audio), os_free(r->codec);
    memset(r, 0, sizeof *r);
}
