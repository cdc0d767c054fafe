// omnishard infer's generation loop (infer.h): one forward per step (gen_forward.h), rank 0 picks, every rank follows.
#include "infer/gen_seq.h"
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

int gen_agree(int rc, int local) {
    if (local) return rc < 0 ? -1 : 0;
    int failed = comm_any_failed(rc < 0);
    if (failed && rc == 0) os_err_echo("stopping: %d other rank(s) reported an error", failed);
    return failed ? -1 : 0;
}

void gen_audio_logits(gen_ctx *c, const float *const *z, int64_t n, const int *predict, const float **xa) {
    int64_t T = c->T, A = c->A, G = c->G, k = 0;
    for (int64_t i = 0; i < n; i++) {   // without the adapter (G = 1, layer shift): z[T : T+G*A] itself
        xa[i] = predict[i] ? z[i] + T : NULL;
        if (predict[i] && c->Wa) memcpy(c->za + k++ * A, xa[i], sizeof(float) * (size_t)A);
    }
    if (!c->Wa || k == 0) return;
    OS_ASSERT(k <= c->rows);
    // the adapter al[k, G*A] = z[T:T+A] @ Wa[G*A, A]^T + ba over the k rows (host memory: the CPU's matmul, fp32,
    // one product as the training head's)
    k_matmul(os_matf(c->al, k, G * A, G * A), os_matf(c->za, k, A, A), os_tensor_t(os_matf(c->Wa, G * A, A, A)), 1.0f,
             0.0f, os_vecf(c->ba, G * A), os_tensor_none());
    for (int64_t i = 0, j = 0; i < n; i++)
        if (predict[i]) xa[i] = c->al + j++ * G * A;
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
int gen_prepare_speech(os_session *s, const os_infer_prompt *p, int local) {
    if (!s->speech.on && !p->wav) return 0;
    wav_view view = {.base = {.n = 1, .path = "the spoken question", .wav_path = view_wav}, .wav = p->wav};
    os_batch b;
    os_batch_alloc(&b, 1, p->R, p->L);
    if (p->speech) memcpy(b.speech, p->speech, (size_t)p->L);
    os_sample smp = {.R = p->R, .L = p->L, .wav_index = p->wav ? 0 : -1};
    int64_t index = 0;
    int rc = os_speech_prepare(&s->speech, &b, &view.base, &smp, &index, 1);
    rc = gen_agree(rc, local);
    os_batch_free(&b);
    return rc;
}

int32_t *gen_prompt_rows(const os_infer_prompt *p, int64_t cap) {
    int32_t *seq = os_alloc(sizeof(int32_t) * (size_t)(p->R * cap), "sequence");   // [R, cap]
    for (int64_t q = 0; q < p->R; q++) memcpy(seq + q * cap, p->ids + q * p->L, sizeof(int32_t) * (size_t)p->L);
    return seq;
}

void gen_ctx_init(gen_ctx *c, os_session *s, const os_gen_opts *o, int64_t rows) {
    const os_model *m = &s->model;
    memset(c, 0, sizeof *c);
    c->m = m, c->o = o, c->G = m->oc.G, c->T = m->oc.text_vocab, c->A = m->oc.audio_vocab, c->rows = rows;
    c->key = os_hash_str("omnishard infer sampling", o->seed);
    c->chooser = o->local || o->lockstep || comm_rank() == 0;
    if (m->b_adapter >= 0 && !o->text_only) {   // gathered once (every rank takes part at ZeRO-3), kept on the chooser
        c->ad = os_alloc(sizeof(float) * (size_t)m->reg.b[m->b_adapter].numel, "adapter weights");
        zr_read_bucket(&s->rt, m->b_adapter, c->ad);
        if (!c->chooser) os_free(c->ad), c->ad = NULL;
        else c->Wa = c->ad + s->rt.reg->p[m->adapter_w].offset, c->ba = c->ad + s->rt.reg->p[m->adapter_b].offset;
    }
    if (!c->chooser) return;
    c->za = os_alloc(sizeof(float) * (size_t)(rows * c->A), "adapter inputs");
    c->al = os_alloc(sizeof(float) * (size_t)(rows * c->G * c->A), "audio logits");
    os_choice_work_init(&c->cw, c->T > c->A ? c->T : c->A);
}

void gen_ctx_free(gen_ctx *c) {
    os_free(c->ad), os_free(c->za), os_free(c->al);
    os_choice_work_free(&c->cw);
}

void gen_seq_init(gen_seq *q, const gen_ctx *c, const os_infer_prompt *p) {
    int64_t G = c->G, N = c->o->max_new_tokens;
    memset(q, 0, sizeof *q);
    q->audio_end = c->o->text_only || p->asr;
    q->gen = os_alloc(sizeof(int32_t) * (size_t)(G * N + 1), "audio ids by step");
    q->r.text = os_alloc(sizeof(int32_t) * (size_t)(N + 1), "text ids");
    q->r.audio = os_alloc(sizeof(int32_t) * (size_t)(G * N + 1), "audio ids");
}

void gen_seq_free(gen_seq *q) {
    os_gen_result_free(&q->r);
    os_free(q->gen);
    memset(q, 0, sizeof *q);
}

int gen_predicts(const gen_ctx *c, const gen_seq *q, int64_t step) {
    return !q->audio_end && step >= c->m->oc.latency;   // latency steps hold the audio back (:412)
}

void gen_choose(gen_ctx *c, const gen_seq *q, const float *z, const float *xa, int64_t step, int32_t *tok) {
    int64_t G = c->G, A = c->A;
    uint64_t ctr = (uint64_t)step * (uint64_t)(G + 1);
    const os_gen_opts *o = c->o;
    const os_gen_result *r = &q->r;
    tok[G] = r->text_end ? os_pad_t(c->T)
                         : os_choose(z, c->T, r->text, r->ntext, 1, o->text_penalty, &o->choice,
                                     os_rng_uniform(c->key, ctr + (uint64_t)G), &c->cw);
    for (int64_t k = 0; k < G; k++)
        tok[k] = !xa ? os_pad_a(A)
                     : os_choose(xa + k * A, A, q->gen + k, r->naudio, G, o->audio_penalty, &o->choice,
                                 os_rng_uniform(c->key, ctr + (uint64_t)k), &c->cw);
}

int gen_record(const gen_ctx *c, gen_seq *q, const int32_t *tok, int64_t step) {
    int64_t G = c->G;
    os_gen_result *r = &q->r;
    r->steps = step + 1;
    if (!r->text_end) {
        if (tok[G] == os_eot(c->T)) r->text_end = 1;
        else r->text[r->ntext++] = tok[G];
    }
    if (!q->audio_end) {
        for (int64_t k = 0; k < G; k++) {
            q->gen[r->naudio * G + k] = tok[k];
            q->audio_end |= tok[k] == os_eoa(c->A);
        }
        r->naudio++;
        r->audio_end = q->audio_end;
    }
    return r->text_end && q->audio_end;
}

void gen_append_rows(const gen_ctx *c, const int32_t *tok, int32_t *rows, int64_t stride) {
    for (int64_t k = 0; k < c->G; k++) rows[k * stride] = os_audio_token(&c->m->oc, k, tok[k]);
    rows[c->G * stride] = tok[c->G];
}

void gen_seq_finish(const gen_ctx *c, gen_seq *q, os_gen_result *r) {
    int64_t G = c->G;
    *r = q->r;
    for (int64_t k = 0; k < G; k++)
        for (int64_t t = 0; t < r->naudio; t++) r->audio[k * r->naudio + t] = q->gen[t * G + k];
    codec_stream(r, G, c->A, c->m->oc.latency);
    os_free(q->gen);
    memset(q, 0, sizeof *q);
}

int os_infer_prompt_check(const os_model *m, const os_infer_prompt *p) {
    if (p->R != m->oc.G + 1)
        return os_errf("the prompt has %lld rows, the model needs %lld (G+1)", (long long)p->R, (long long)m->oc.G + 1);
    if (p->L > m->cfg.max_position_embeddings)
        return os_errf("the prompt has %lld positions, more than the model allows (max_position_embeddings %lld, "
                       "config.json)", (long long)p->L, (long long)m->cfg.max_position_embeddings);
    return 0;
}

// lockstep: whether the generation of any rank is still running (this rank's: mine)
static int ranks_running(int mine) {
    int64_t v = mine;
    comm_allreduce_max_i64(&v, 1);
    return v > 0;
}

int32_t *gen_idle_prompt(os_infer_prompt *q, const os_model *m) {
    int64_t G = m->oc.G;
    *q = (os_infer_prompt){.R = G + 1, .L = 1, .ids = os_alloc(sizeof(int32_t) * (size_t)(G + 1), "idle prompt")};
    for (int64_t k = 0; k < G; k++) q->ids[k] = os_audio_token(&m->oc, k, os_pad_a(m->oc.audio_vocab));
    q->ids[G] = os_pad_t(m->oc.text_vocab);
    return q->ids;
}

// the tokens a rank appends after its generation ended (lockstep): pad_a in every audio row, pad_t
static void idle_tokens(const os_model *m, int32_t *tok) {
    for (int64_t k = 0; k < m->oc.G; k++) tok[k] = os_pad_a(m->oc.audio_vocab);
    tok[m->oc.G] = os_pad_t(m->oc.text_vocab);
}

// the prompt's checks and its speech front end (not when the caller ran it: speech_batched); -1 + message (on
// every rank unless local)
static int prompt_ready(os_session *s, const os_infer_prompt *p, const os_gen_opts *o, int local) {
    if (gen_agree(os_infer_prompt_check(&s->model, p), local) < 0) return -1;
    return o->speech_batched ? 0 : gen_prepare_speech(s, p, local);
}

int os_generate(os_session *s, const os_infer_prompt *p, const os_gen_opts *o, os_gen_result *r) {
    const os_model *m = &s->model;
    int64_t G = m->oc.G, R = G + 1, N = o->max_new_tokens;
    memset(r, 0, sizeof *r);
    int rc = p ? prompt_ready(s, p, o, o->local || o->lockstep) : 0;
    if (rc < 0 && !o->lockstep) return -1;
    // lockstep: a rank without a prompt (or whose prompt failed) runs the same forwards over pad positions
    os_infer_prompt idle;
    int32_t *idle_ids = p && rc == 0 ? NULL : gen_idle_prompt(&idle, m);
    if (idle_ids) {
        if (!o->speech_batched) gen_prepare_speech(s, &idle, 1);   // no speech (no error): the speech states cleared
        p = &idle;
    }
    int64_t cap = p->L + N;
    gen_ctx c;
    gen_ctx_init(&c, s, o, 1);
    gen_seq q;
    gen_seq_init(&q, &c, p);
    int32_t *seq = gen_prompt_rows(p, cap);
    os_gen_fwd fw;
    os_gen_fwd_init(&fw, s, R, p->L, p->speech, cap, o->kv_cache);
    fw.batched = o->speech_batched, fw.proj = p->proj;
    int running = !idle_ids;
    int64_t positions = 0;
    for (int64_t step = 0, L = p->L; step < N; step++, L++) {
        const float *z = os_gen_fwd_next(&fw, seq, L);
        int32_t tok[OS_MAX_G + 1];
        if (running && c.chooser) {
            const float *xa;
            int predict = gen_predicts(&c, &q, step);
            gen_audio_logits(&c, &z, 1, &predict, &xa);
            gen_choose(&c, &q, z, xa, step, tok);
        }
        if (running && !o->local && !o->lockstep) comm_bcast(tok, (int64_t)sizeof(int32_t) * R, 0);   // every rank appends the same position
        int was = running;
        if (running && gen_record(&c, &q, tok, step)) running = 0, positions = fw.positions;
        if (was && o->progress) o->progress(o->progress_ctx, &q.r);
        if (o->lockstep ? !ranks_running(running) : !running) break;
        if (!running) idle_tokens(m, tok);
        gen_append_rows(&c, tok, seq + L, cap);
    }
    gen_seq_finish(&c, &q, r);
    r->positions = running ? fw.positions : positions;
    os_gen_fwd_free(&fw);
    os_free(seq), os_free(idle_ids);
    gen_ctx_free(&c);
    if (idle_ids) os_gen_result_free(r);
    return rc;
}

void os_gen_result_free(os_gen_result *r) {
    os_free(r->text), os_free(r->audio), os_free(r->codec);
    memset(r, 0, sizeof *r);
}
