// The model forward of generation (gen_forward.h).
#include "infer/gen_forward.h"
#include "core/alloc.h"
#include "core/err.h"
#include "model/loss.h"
#include <string.h>

void os_gen_fwd_init(os_gen_fwd *f, os_session *s, int64_t R, int64_t P, const uint8_t *speech, int64_t cap, int cached) {
    memset(f, 0, sizeof *f);
    f->s = s, f->R = R, f->P = P, f->cap = cap, f->speech = speech, f->cached = cached;
    if (cached) os_kv_cache_init(&f->kv, &s->model, 1, cap);
    f->ids = os_alloc(sizeof(int32_t) * (size_t)(f->R * cap), "generation rows");
    f->mask = os_alloc((size_t)cap, "generation speech mask");
    f->z = os_alloc(sizeof(float) * (size_t)s->model.V, "last logits");
}

const float *os_gen_fwd_next(os_gen_fwd *f, const int32_t *seq, int64_t L) {
    os_session *s = f->s;
    int64_t lo = f->cached ? f->kv.len : 0, n = L - lo;   // run positions [lo, L)
    OS_ASSERT(n >= 1 && L <= f->cap && (!f->cached || lo == 0 || n == 1));
    for (int64_t r = 0; r < f->R; r++) memcpy(f->ids + r * n, seq + r * f->cap + lo, sizeof(int32_t) * (size_t)n);
    // the speech positions lie in the prompt: only a forward from position 0 has them (and runs the speech path)
    int speech = lo == 0 && f->speech;
    for (int64_t i = 0; speech && i < n; i++) f->mask[i] = i < f->P ? f->speech[i] : 0;
    const float *proj = NULL;
    os_weights w = os_runtime_weights(&s->rt);
    if (f->batched) proj = speech ? f->proj : NULL;
    else if (lo == 0 && s->speech.on) {
        os_speech *sp = &s->speech;
        os_speech_fwd(sp, &w);   // encoder + projector, on every rank (fixed schedule)
        proj = os_speech_proj(sp, 0);
        for (int64_t bi = 0; bi < sp->B; bi++) sp->state[bi] = sp->state[bi] ? 2 : 0;   // later: reuse the encoder output
    }
    const int64_t at[1] = {0};   // the sample's speech rows: proj's from its first
    os_model_input in = {.B = 1, .R = f->R, .L = n, .ids = f->ids, .speech = speech ? f->mask : NULL, .proj = proj,
                         .proj_at = proj ? at : NULL};
    os_model_opts o = {.recompute = 1, .kv = f->cached ? &f->kv : NULL};
    os_model_forward(&s->acts, &in, &w, &o);
    os_loss_logits(&s->acts.loss, &w, s->acts.hn, 1, n, 1, f->z);
    f->positions += n;
    return f->z;
}

void os_gen_fwd_step(os_gen_fwd *const *f, int64_t n, const int32_t *tok, float *z) {
    os_kv_cache *kvs[OS_GEN_MAX_BATCH];
    OS_ASSERT(n >= 1 && n <= OS_GEN_MAX_BATCH);
    for (int64_t b = 0; b < n; b++) {
        OS_ASSERT(f[b]->cached && f[b]->kv.len >= f[b]->P && f[b]->kv.len < f[b]->cap);
        kvs[b] = &f[b]->kv, f[b]->positions++;
    }
    os_session *s = f[0]->s;
    os_weights w = os_runtime_weights(&s->rt);
    os_model_input in = {.B = n, .R = f[0]->R, .L = 1, .ids = tok};
    os_model_opts o = {.recompute = 1, .kvs = kvs};
    os_model_forward(&s->acts, &in, &w, &o);
    os_loss_logits(&s->acts.loss, &w, s->acts.hn, n, 1, 1, z);
}

void os_gen_fwd_free(os_gen_fwd *f) {
    if (f->cached) os_kv_cache_free(&f->kv);
    os_free(f->ids), os_free(f->mask), os_free(f->z);
    memset(f, 0, sizeof *f);
}
