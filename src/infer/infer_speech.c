// Spoken questions of generation (infer_speech.h).
#include "infer/infer_speech.h"
#include "core/alloc.h"
#include "core/err.h"
#include "kernels/ops.h"
#include "session/model_runtime.h"
#include <string.h>

// the prompts as a dataset whose speech input i is prompt i's WAV (for the front end's messages and reads)
typedef struct {
    os_dataset base;
    const os_infer_prompt *const *p;
    char **why;
} prompts_view;

static const char *view_wav(os_dataset *d, int64_t i) { return ((prompts_view *)d)->p[i]->wav; }

static void failed(void *ctx, int64_t bi) {
    prompts_view *v = ctx;
    const char *msg = os_errmsg();
    size_t n = strlen(msg);
    v->why[bi] = os_alloc(n + 1, "speech error message");
    memcpy(v->why[bi], msg, n + 1);
}

// the prompts' speech inputs into the front end as one batch of n samples (log-mel now, the encoder at os_speech_fwd);
// the count of failures (why)
static int64_t prepare(os_session *s, const os_infer_prompt *const *p, int64_t n, const int64_t *index, char **why) {
    int64_t L = 1, R = s->model.oc.G + 1;
    for (int64_t i = 0; i < n; i++) L = p[i]->L > L ? p[i]->L : L;
    os_batch b;
    os_batch_alloc(&b, n, R, L);
    os_sample *smp = os_alloc(sizeof(os_sample) * (size_t)(n + 1), "speech samples");
    int64_t *at = os_alloc(sizeof(int64_t) * (size_t)(n + 1), "speech sample indices");
    for (int64_t i = 0; i < n; i++) {
        if (p[i]->speech) memcpy(b.speech + i * L, p[i]->speech, (size_t)p[i]->L);
        smp[i] = (os_sample){.R = R, .L = p[i]->L, .wav_index = p[i]->wav ? i : -1};
        at[i] = index[i];
    }
    prompts_view v = {.base = {.n = n, .path = "the spoken question", .wav_path = view_wav}, .p = p, .why = why};
    int64_t rc = os_speech_prepare_each(&s->speech, &b, &v.base, smp, at, n, failed, &v);
    os_batch_free(&b);
    os_free(smp), os_free(at);
    return rc;
}

int64_t os_infer_speech_batch(os_session *s, os_infer_prompt *const *p, int64_t n, const int64_t *index, int local,
                              char **why) {
    os_speech *sp = &s->speech;
    int64_t bad = prepare(s, (const os_infer_prompt *const *)p, n, index, why), spoken = 0;
    for (int64_t i = 0; sp->on && i < n; i++) spoken += sp->state[i] != 0;
    if (!sp->on || (local && !spoken)) return bad;
    os_weights w = os_runtime_weights(&s->rt);
    os_speech_fwd(sp, &w);
    int64_t floats = sp->T_s * sp->C;
    for (int64_t i = 0; i < n; i++) {
        const float *proj = os_speech_proj(sp, i);
        if (!proj) continue;
        p[i]->proj = os_k->alloc((int64_t)sizeof(float) * floats, "projector output[T_s, C]");   // the backend's
        os_k->copy(p[i]->proj, proj, floats);
    }
    return bad;
}
