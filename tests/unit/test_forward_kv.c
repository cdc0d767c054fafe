// Unit test of the model forward's KV cache (src/model/forward.c): the invariant cache on == cache off. A tiny
// random SLAM-Omni decoder (G = 3 with the adapter, 2 layers, grouped KV heads) runs one forward over a whole
// sequence (no cache), then the same positions as a prefix plus a continuation, and position by position, with a
// KV cache; every position's lm_head logits must agree (the attention sums differ in blocking only: tolerance).
// Two samples of the same length run together (B = 2). The weights come from a plain table (os_weights over one
// buffer per bucket, laid out by the runtime's registry built from the model's declarations), the way any owner of
// parameters supplies them.
#include "core/alloc.h"
#include "core/rng.h"
#include "model/forward.h"
#include "model/loss.h"
#include "session/model_runtime.h"
#include "check.h"
#include <math.h>
#include <string.h>

enum { NB = 2, LEN = 11, PREFIX = 7, G = 3 };

typedef struct {
    zr_registry reg;   // where each parameter lives in its bucket's buffer
    float **bucket;
} table;

static void nop(void *ctx, int b) { (void)ctx, (void)b; }
static const float *param(void *ctx, int pid, const char *caller) {
    table *t = ctx;
    (void)caller;
    const zr_tensor *p = &t->reg.p[pid];
    return t->bucket[p->bucket] + p->offset;
}

static os_tensor tensor(void *ctx, int pid, const char *caller) {   // fp32 values, as the runtime's without bf16
    const zr_tensor *p = &((table *)ctx)->reg.p[pid];
    const float *d = param(ctx, pid, caller);
    return p->ndim < 2 ? os_vecf(d, p->numel) : os_matf(d, p->shape[0], p->numel / p->shape[0], p->numel / p->shape[0]);
}

// forward of positions [p0, p0+L) of ids [NB, R, LEN] (cache: NULL or holding [0, p0)) -> logits [NB*L, V]
static void fwd(os_model_acts *a, const os_weights *w, const int32_t *ids, int64_t p0, int64_t L, os_kv_cache *kv,
                float *logits) {
    const os_model *m = a->m;
    int64_t R = G + 1;
    int32_t *part = os_alloc(sizeof(int32_t) * (size_t)(NB * R * L), "ids");
    for (int64_t b = 0; b < NB * R; b++) memcpy(part + b * L, ids + b * LEN + p0, sizeof(int32_t) * (size_t)L);
    os_model_input in = {.B = NB, .R = R, .L = L, .ids = part};
    os_model_opts o = {.kv = kv};
    os_model_forward(a, &in, w, &o);
    os_loss_logits(&a->loss, w, a->hn, NB, L, 0, logits);
    (void)m;
    os_free(part);
}

static double max_rel(const float *got, const float *want, int64_t n) {
    double mx = 0, scale = 1e-6;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs((double)got[i] - want[i]) / scale);
    return mx;
}

int main(void) {
    os_qwen2_config cfg = {.hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 2, .num_attention_heads = 4,
                           .num_key_value_heads = 2, .head_dim = 8, .vocab_size = 0, .rms_norm_eps = 1e-6,
                           .rope_theta = 10000.0};
    os_omni_config oc;
    os_omni_config_default(&oc, G);
    oc.text_vocab = 96, oc.audio_vocab = 64;
    os_model m;
    CHECK(os_model_build(&m, &cfg, &oc) == 0, "model build");
    table t = {.bucket = os_alloc(sizeof(float *) * (size_t)m.reg.nb, "buckets")};
    os_runtime_registry(&m.reg, &t.reg);
    for (int b = 0; b < m.reg.nb; b++) {
        t.bucket[b] = os_alloc(sizeof(float) * (size_t)m.reg.b[b].numel, "bucket");
        os_rng_fill_uniform(t.bucket[b], m.reg.b[b].numel, 77 + (uint64_t)b, 0, -0.3f, 0.3f);
    }
    os_weights w = {.ctx = &t, .prefetch = nop, .gather = nop, .release = nop, .param = param, .tensor = tensor};
    int64_t R = G + 1, V = m.V;
    int32_t ids[NB * (G + 1) * LEN];
    for (int64_t i = 0; i < NB * R * LEN; i++) ids[i] = (int32_t)(os_rng_u64(5, (uint64_t)i) % (uint64_t)V);

    os_model_acts a;
    os_acts_init(&a, &m);
    float *full = os_alloc(sizeof(float) * (size_t)(NB * LEN * V), "logits without cache");
    fwd(&a, &w, ids, 0, LEN, NULL, full);

    // prefix + continuation
    os_kv_cache kv;
    os_kv_cache_init(&kv, &m, NB, LEN);
    float *got = os_alloc(sizeof(float) * (size_t)(NB * LEN * V), "logits with cache");
    float *part = os_alloc(sizeof(float) * (size_t)(NB * LEN * V), "logits of one call");
    fwd(&a, &w, ids, 0, PREFIX, &kv, part);
    CHECK(kv.len == PREFIX, "cache holds %lld positions after the prefix, expected %d", (long long)kv.len, PREFIX);
    for (int64_t b = 0; b < NB; b++) memcpy(got + b * LEN * V, part + b * PREFIX * V, sizeof(float) * (size_t)(PREFIX * V));
    fwd(&a, &w, ids, PREFIX, LEN - PREFIX, &kv, part);
    for (int64_t b = 0; b < NB; b++)
        memcpy(got + (b * LEN + PREFIX) * V, part + b * (LEN - PREFIX) * V, sizeof(float) * (size_t)((LEN - PREFIX) * V));
    double e = max_rel(got, full, NB * LEN * V);
    CHECK(e < 1e-5, "prefix + continuation with the cache vs one forward: max relative difference %.3g", e);

    // one position at a time, each sample's last logits only
    kv.len = 0;
    for (int64_t p = 0; p < LEN; p++) {
        int32_t one[NB * (G + 1)];
        for (int64_t b = 0; b < NB * R; b++) one[b] = ids[b * LEN + p];
        os_model_input in = {.B = NB, .R = R, .L = 1, .ids = one};
        os_model_opts o = {.kv = &kv};
        os_model_forward(&a, &in, &w, &o);
        os_loss_logits(&a.loss, &w, a.hn, NB, 1, 1, part);
        for (int64_t b = 0; b < NB; b++) {
            double ep = max_rel(part + b * V, full + (b * LEN + p) * V, V);
            CHECK(ep < 1e-5, "position %lld sample %lld one at a time: max relative difference %.3g", (long long)p,
                  (long long)b, ep);
        }
    }
    // the cache must matter: without it the continuation's logits differ
    fwd(&a, &w, ids, PREFIX, LEN - PREFIX, NULL, part);
    CHECK(max_rel(part, full + PREFIX * V, (LEN - PREFIX) * V) > 1e-3, "a continuation without the cache differs");

    os_kv_cache_free(&kv);
    os_acts_free(&a);
    os_free(full), os_free(got), os_free(part);
    for (int b = 0; b < m.reg.nb; b++) os_free(t.bucket[b]);
    os_free(t.bucket);
    zr_reg_free(&t.reg);
    os_model_free(&m);
    return check_report("test_forward_kv");
}
