// Batched decoding (infer.h os_generate_batch): B slots, each a sequence with its own KV cache; one forward per
// step runs the new position of every sequence still decoding (gen_forward.h os_gen_fwd_step). Lockstep (ZeRO-3,
// records split over ranks): each step the ranks agree on its prefills (the most any rank starts) and whether a
// decode forward runs; a rank with fewer runs pad forwards, so every rank makes the same gathers in the same order.
#include "infer/gen_seq.h"
#include "infer/gen_forward.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/timer.h"
#include "zero/comm.h"
#include <string.h>

typedef struct {
    int64_t j;           // the prompt it decodes (-1: idle)
    int64_t step;        // the step whose logits z holds
    os_infer_prompt p;
    gen_seq q;
    os_gen_fwd fw;       // its forward and KV cache
    const float *z;      // [V] the lm_head logits of its current step
    double t0;
} slot;

typedef struct {
    os_session *s;
    const os_gen_opts *o;
    gen_ctx c;
    int64_t n, next;     // prompts, the next one to start
    os_gen_prompt_fn prompt;
    os_gen_done_fn done;
    void *ctx;
} batch;

static void slot_free(slot *x) {
    if (x->j < 0) return;
    gen_seq_free(&x->q);
    os_gen_fwd_free(&x->fw);
    os_infer_prompt_free(&x->p);
    x->j = -1;
}

// the next prompt into x and its prefill (alone, speech path included): x->z its first step's logits
static int slot_start(batch *bt, slot *x) {
    os_session *s = bt->s;
    int64_t j = bt->next++, R = s->model.oc.G + 1, N = bt->o->max_new_tokens;
    int local = bt->o->local || bt->o->lockstep;   // lockstep: a failure is this rank's (it keeps joining)
    x->t0 = os_now();
    int rc = bt->prompt(bt->ctx, j, &x->p);
    if (rc == 0) rc = os_infer_prompt_check(&s->model, &x->p);
    if (gen_agree(rc, local) < 0 || (!bt->o->speech_batched && gen_prepare_speech(s, &x->p, local) < 0)) {
        os_infer_prompt_free(&x->p);
        return -1;
    }
    int64_t P = x->p.L, cap = P + N;
    x->j = j, x->step = 0;
    gen_seq_init(&x->q, &bt->c, &x->p);
    os_gen_fwd_init(&x->fw, s, R, P, x->p.speech, cap, 1);
    x->fw.batched = bt->o->speech_batched, x->fw.proj = x->p.proj;   // the speech path ran beforehand
    int32_t *rows = gen_prompt_rows(&x->p, cap);
    x->z = os_gen_fwd_next(&x->fw, rows, P);
    os_free(rows);
    return 0;
}

// x's sequence ended: its result to done, the slot idle
static int slot_finish(batch *bt, slot *x) {
    os_gen_result r;
    gen_seq_finish(&bt->c, &x->q, &r);
    r.positions = x->fw.positions;
    int rc = bt->done(bt->ctx, x->j, &x->p, &r, os_now() - x->t0);
    os_gen_result_free(&r);
    slot_free(x);
    return gen_agree(rc, bt->o->local || bt->o->lockstep);
}

// lockstep: one forward over one pad position (logits unread, no speech), so this rank joins the gathers of a
// forward it has no sequence for
static void pad_forward(os_session *s) {
    os_infer_prompt p;
    int32_t *ids = gen_idle_prompt(&p, &s->model);
    os_gen_fwd f;
    os_gen_fwd_init(&f, s, p.R, 1, NULL, 1, 1);
    f.batched = 1;   // the speech path does not run
    os_gen_fwd_next(&f, ids, 1);
    os_gen_fwd_free(&f);
    os_free(ids);
}

// the chooser: the tokens of every running sequence's current step into tok [k, R]
static void choose_all(gen_ctx *c, slot *const *run, int64_t k, int64_t R, int32_t *tok) {
    const float *z[OS_GEN_MAX_BATCH], *xa[OS_GEN_MAX_BATCH];
    int predict[OS_GEN_MAX_BATCH];
    for (int64_t i = 0; i < k; i++) z[i] = run[i]->z, predict[i] = gen_predicts(c, &run[i]->q, run[i]->step);
    gen_audio_logits(c, z, k, predict, xa);   // one product with the adapter over the k rows
    for (int64_t i = 0; i < k; i++) gen_choose(c, &run[i]->q, z[i], xa[i], run[i]->step, tok + i * R);
}

int os_generate_batch(os_session *s, int64_t B, int64_t n, const os_gen_opts *o, os_gen_prompt_fn prompt,
                      os_gen_done_fn done, void *ctx) {
    if (B < 1 || B > OS_GEN_MAX_BATCH) return os_errf("batch of %lld sequences (expected 1 to %d)", (long long)B, OS_GEN_MAX_BATCH);
    if (!o->kv_cache) return os_errf("batched decoding needs the KV cache (--kv_cache true)");
    if (o->lockstep && !o->speech_batched)
        return os_errf("batched decoding in lockstep needs the spoken questions encoded beforehand (speech_batched)");
    int lock = o->lockstep;
    if (B > n) B = n;
    if (B < 1 && !lock) return 0;
    if (B < 1) B = 1;   // lockstep without records: pad forwards only
    const os_model *m = &s->model;
    int64_t R = m->oc.G + 1, V = m->V, N = o->max_new_tokens;
    batch bt = {.s = s, .o = o, .n = n, .prompt = prompt, .done = done, .ctx = ctx};
    gen_ctx_init(&bt.c, s, o, B);
    slot *sl = os_alloc(sizeof(slot) * (size_t)B, "decoding slots"), *run[OS_GEN_MAX_BATCH], *next[OS_GEN_MAX_BATCH];
    for (int64_t b = 0; b < B; b++) sl[b].j = -1;
    float *z = os_alloc(sizeof(float) * (size_t)(B * V), "batched logits");        // [B, V]
    int32_t *tok = os_alloc(sizeof(int32_t) * (size_t)(B * R), "batched tokens");  // [B, R]
    int32_t *rows = os_alloc(sizeof(int32_t) * (size_t)(B * R), "batched rows");   // [B, R, 1]
    os_gen_fwd *fw[OS_GEN_MAX_BATCH];
    int rc = 0;
    int64_t g = 0;   // sequences whose next position waits for the decode forward (rows, fw, next)
    while (rc == 0 || lock) {   // lockstep: a rank that failed keeps joining until every rank is done
        int64_t starts = 0;
        for (int64_t b = 0; b < B; b++) starts += sl[b].j < 0;
        if (starts > n - bt.next) starts = n - bt.next;
        int64_t most[2] = {starts, g};   // this step's prefills, decode rows (lockstep: the most of any rank)
        if (lock) comm_allreduce_max_i64(most, 2);
        if (most[0] == 0 && most[1] == 0) break;
        if (g > 0) os_gen_fwd_step(fw, g, rows, z);
        else if (most[1] > 0) pad_forward(s);
        for (int64_t i = 0; i < g; i++) next[i]->step++, next[i]->z = z + i * V;
        int64_t k = 0, pre = 0;   // sequences with a step to choose; prefills run
        for (int64_t b = 0; b < B && (rc == 0 || lock); b++) {   // free slots take the next prompts
            if (sl[b].j < 0 && bt.next < n) {
                if (slot_start(&bt, &sl[b]) < 0) rc = -1;
                else pre++;
            }
            if (sl[b].j >= 0) run[k++] = &sl[b];
        }
        for (; lock && pre < most[0]; pre++) pad_forward(s);
        g = 0;
        if ((rc < 0 && !lock) || k == 0) continue;
        if (bt.c.chooser) choose_all(&bt.c, run, k, R, tok);
        if (!o->local && !lock) comm_bcast(tok, (int64_t)sizeof(int32_t) * k * R, 0);   // every rank appends the same
        for (int64_t i = 0; i < k; i++) {
            slot *x = run[i];
            if (gen_record(&bt.c, &x->q, tok + i * R, x->step) || x->step + 1 == N) {
                if (slot_finish(&bt, x) < 0) rc = -1;
                continue;
            }
            gen_append_rows(&bt.c, tok + i * R, rows + g * R, 1);
            fw[g] = &x->fw, next[g++] = x;
        }
    }
    for (int64_t b = 0; b < B; b++) slot_free(&sl[b]);
    os_free(sl), os_free(z), os_free(tok), os_free(rows);
    gen_ctx_free(&bt.c);
    return rc;
}
