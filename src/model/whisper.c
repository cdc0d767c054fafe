#include "model/whisper.h"
#include "core/alloc.h"
#include "core/err.h"
#include "audio/logmel.h"
#include "kernels/ops.h"
#include "model/linear.h"
#include <stdio.h>
#include <string.h>

#define F32(n, what) os_k->alloc((int64_t)sizeof(float) * ((n) > 0 ? (n) : 1), what)   // the backend's memory

static int par(os_registry *r, const char *name, int ndim, int64_t a, int64_t b, int64_t c) {
    int64_t s[3] = {a, b, c};
    return os_reg_param(r, name, ndim, s, OS_INIT_REQUIRED, 0);
}

int os_whisper_declare(os_whisper *w, os_registry *r, const os_whisper_config *c) {
    memset(w, 0, sizeof *w);
    if (c->d_model < 1 || c->encoder_layers < 1 || c->encoder_attention_heads < 1 || c->encoder_ffn_dim < 1 ||
        c->num_mel_bins < 1 || c->max_source_positions < 1 || c->d_model % c->encoder_attention_heads)
        return os_errf("Whisper encoder config: d_model %d, encoder_layers %d, heads %d, ffn %d, mel bins %d, "
                       "max_source_positions %d: expected positive sizes with d_model a multiple of the heads",
                       c->d_model, c->encoder_layers, c->encoder_attention_heads, c->encoder_ffn_dim, c->num_mel_bins,
                       c->max_source_positions);
    w->cfg = *c;
    int64_t d = c->d_model, F = c->encoder_ffn_dim;
    w->d = d, w->H = c->encoder_attention_heads, w->F = F, w->n_mels = c->num_mel_bins;
    w->n_pos = c->max_source_positions, w->nlayers = c->encoder_layers;
    w->b_front = os_reg_bucket(r, "encoder.front", 0);
    w->conv1_w = par(r, "encoder.conv1.weight", 3, d, w->n_mels, 3);
    w->conv1_b = par(r, "encoder.conv1.bias", 1, d, 0, 0);
    w->conv2_w = par(r, "encoder.conv2.weight", 3, d, d, 3);
    w->conv2_b = par(r, "encoder.conv2.bias", 1, d, 0, 0);
    w->pos = par(r, "encoder.embed_positions.weight", 2, w->n_pos, d, 0);
    w->layer = os_alloc(sizeof *w->layer * (size_t)w->nlayers, "encoder layer ids");
    w->b_layer = os_alloc(sizeof(int) * (size_t)w->nlayers, "encoder layer buckets");
    char nm[112];
    for (int64_t l = 0; l < w->nlayers; l++) {
        os_whisper_layer_ids *L = &w->layer[l];
        snprintf(nm, sizeof nm, "encoder.layers.%lld", (long long)l);
        w->b_layer[l] = os_reg_bucket(r, nm, 0);
#define P(field, suffix, nd, a, b) \
    snprintf(nm, sizeof nm, "encoder.layers.%lld.%s", (long long)l, suffix), L->field = par(r, nm, nd, a, b, 0)
        P(ln1_w, "self_attn_layer_norm.weight", 1, d, 0);
        P(ln1_b, "self_attn_layer_norm.bias", 1, d, 0);
        P(q_w, "self_attn.q_proj.weight", 2, d, d);
        P(q_b, "self_attn.q_proj.bias", 1, d, 0);
        P(k_w, "self_attn.k_proj.weight", 2, d, d);
        P(v_w, "self_attn.v_proj.weight", 2, d, d);
        P(v_b, "self_attn.v_proj.bias", 1, d, 0);
        P(o_w, "self_attn.out_proj.weight", 2, d, d);
        P(o_b, "self_attn.out_proj.bias", 1, d, 0);
        P(ln2_w, "final_layer_norm.weight", 1, d, 0);
        P(ln2_b, "final_layer_norm.bias", 1, d, 0);
        P(fc1_w, "fc1.weight", 2, F, d);
        P(fc1_b, "fc1.bias", 1, F, 0);
        P(fc2_w, "fc2.weight", 2, d, F);
        P(fc2_b, "fc2.bias", 1, d, 0);
#undef P
    }
    w->b_final = os_reg_bucket(r, "encoder.layer_norm", 0);
    w->lnf_w = par(r, "encoder.layer_norm.weight", 1, d, 0, 0);
    w->lnf_b = par(r, "encoder.layer_norm.bias", 1, d, 0, 0);
    return 0;
}

void os_whisper_free(os_whisper *w) {
    os_free(w->layer);
    os_free(w->b_layer);
    memset(w, 0, sizeof *w);
}

int64_t os_whisper_mel_frames(const os_whisper *w) { return 2 * w->n_pos; }
int64_t os_whisper_wave_samples(const os_whisper *w) { return os_whisper_mel_frames(w) * OS_MEL_HOP; }
int64_t os_whisper_out_frames(int64_t T_mel) { return T_mel >= 1 ? (T_mel - 1) / 2 + 1 : 0; }

int os_whisper_name_map(const os_st_dir *d, const char *dir, os_name_map *map) {
    static const char *const prefixes[] = {"encoder.", "model.encoder.", ""};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%sconv1.weight", prefixes[i]);
        if (os_st_dir_find(d, name)) {
            map->from = "encoder.", map->to = prefixes[i];
            return 0;
        }
    }
    return os_errf("%s: no Whisper encoder tensors (looked for 'encoder.conv1.weight' of a WhisperModel, "
                   "'model.encoder.conv1.weight' of a WhisperForConditionalGeneration, 'conv1.weight' of a WhisperEncoder)",
                   dir);
}

// scratch of the n clips' block forward, R = n*T rows; lnh [R, d]: a norm's output rounded once (bf16) where the
// products round their inputs (os_k->bf16; NULL otherwise)
typedef struct {
    float *q, *k, *v, *att, *ao, *tmp, *hid;
    void *lnh;
} enc_scratch;

// a norm's output (fp32 in s->tmp, [R, d]) as its products read it: fp32, or under bf16 rounded once into s->lnh
// (the self-attention norm's three readers q, k, v and the MLP norm's fc1 are products; nothing else reads it)
static os_tensor norm_out(const enc_scratch *s, int64_t R, int64_t d) {
    os_tensor y = os_matf(s->tmp, R, d, d);
    if (!s->lnh) return y;
    os_tensor h = os_mat(s->lnh, OS_BF16, R, d, d);
    os_k->cast(h, y);
    return h;
}

// x[n, T, d] (n clips, R = n*T rows) in place through block l (its bucket gathered), one call per op whatever n is:
// the norms, products and adds are per row and attention per clip (batch n), so each clip's bits are those of a
// forward of that clip alone. The attention output and the GELU output each have one reader, their product, which
// rounds them (once) under bf16.
static void block_fwd(const os_whisper *w, int64_t l, const os_weights *wt, float *x, int64_t n, int64_t T,
                      enc_scratch *s) {
    const os_whisper_layer_ids *P = &w->layer[l];
    int64_t d = w->d, H = w->H, F = w->F, R = n * T;
    os_k->layernorm_fwd(s->tmp, NULL, NULL, x, os_weight(wt, P->ln1_w), os_weight(wt, P->ln1_b), R, d, 1e-5f);
    os_tensor ln = norm_out(s, R, d);
    os_linear_fwd_t(s->q, ln, os_weight_t(wt, P->q_w), os_weight(wt, P->q_b), R, d);
    os_linear_fwd_t(s->k, ln, os_weight_t(wt, P->k_w), NULL, R, d);
    os_linear_fwd_t(s->v, ln, os_weight_t(wt, P->v_w), os_weight(wt, P->v_b), R, d);
    os_k->attention_fwd(s->ao, s->att, s->q, s->k, s->v, NULL, NULL, 0, n, T, H, H, d / H);
    os_linear_fwd(s->tmp, s->ao, os_weight_t(wt, P->o_w), os_weight(wt, P->o_b), R, d, d);
    os_k->add(x, x, s->tmp, R * d);
    os_k->layernorm_fwd(s->tmp, NULL, NULL, x, os_weight(wt, P->ln2_w), os_weight(wt, P->ln2_b), R, d, 1e-5f);
    os_linear_fwd_t(s->hid, norm_out(s, R, d), os_weight_t(wt, P->fc1_w), os_weight(wt, P->fc1_b), R, F);
    os_k->gelu_fwd(s->hid, s->hid, R * F);
    os_linear_fwd(s->tmp, s->hid, os_weight_t(wt, P->fc2_w), os_weight(wt, P->fc2_b), R, F, d);
    os_k->add(x, x, s->tmp, R * d);
}

// the front of n clips into x[n, T, d]: each clip's two convolutions (conv1d takes one input), the GELUs, the
// transpose [d, T] -> [T, d] and the positions over all clips at once
static void front_fwd(const os_whisper *w, const os_weights *wt, int64_t n, const float *const *mel, int64_t T_mel,
                      int64_t T, float *x) {
    int64_t d = w->d;
    float *c1 = F32(n * d * T_mel, "encoder conv1 out[n, d, T_mel]"), *c2 = F32(n * d * T, "encoder conv2 out[n, d, T]");
    const float *c1w = os_weight(wt, w->conv1_w), *c1b = os_weight(wt, w->conv1_b);
    const float *c2w = os_weight(wt, w->conv2_w), *c2b = os_weight(wt, w->conv2_b);
    for (int64_t i = 0; i < n; i++) os_k->conv1d_fwd(c1 + i * d * T_mel, mel[i], c1w, c1b, w->n_mels, T_mel, d, 3, 1, 1);
    os_k->gelu_fwd(c1, c1, n * d * T_mel);
    for (int64_t i = 0; i < n; i++) os_k->conv1d_fwd(c2 + i * d * T, c1 + i * d * T_mel, c2w, c2b, d, T_mel, d, 3, 2, 1);
    os_k->gelu_fwd(c2, c2, n * d * T);
    os_k->transpose(x, c2, n, d, T);                              // [n, d, T] -> [n, T, d]
    os_k->add_row_bias(x, os_weight(wt, w->pos), n, T * d);       // plus the positions [T, d], each clip
    os_k->free(c1), os_k->free(c2);
}

void os_whisper_fwd(const os_whisper *w, const os_weights *wt, int64_t n, const float *const *mel, int64_t T_mel,
                    float *const *out) {
    int64_t d = w->d, T = os_whisper_out_frames(T_mel), R = n * T;
    OS_ASSERT(T <= w->n_pos);
    int together = 1;   // the outputs one block [n, T, d]: the encoder runs in it; else in scratch, normed into each
    for (int64_t i = 1; i < n; i++) together &= out[i] == out[0] + i * T * d;
    float *x = !n ? NULL : together ? out[0] : F32(R * d, "encoder frames[n, T, d]");
    // ---- front: convolutions, GELU, positions ----
    wt->gather(wt->ctx, w->b_front);
    if (w->nlayers > 0) wt->prefetch(wt->ctx, w->b_layer[0]);
    if (n) front_fwd(w, wt, n, mel, T_mel, T, x);
    wt->release(wt->ctx, w->b_front);
    // ---- blocks ----
    enc_scratch s = {0};
    if (n) {
        s.q = F32(R * d, "encoder q"), s.k = F32(R * d, "encoder k");
        s.v = F32(R * d, "encoder v"), s.att = F32(os_k->attention_stats_floats(n, T, w->H), "encoder attention stats");
        s.ao = F32(R * d, "encoder attn out"), s.tmp = F32(R * d, "encoder tmp"), s.hid = F32(R * w->F, "encoder mlp");
        s.lnh = os_k->bf16 ? os_k->alloc(2 * R * d, "encoder norm output (bf16)") : NULL;
    }
    for (int64_t l = 0; l < w->nlayers; l++) {
        wt->prefetch(wt->ctx, l + 1 < w->nlayers ? w->b_layer[l + 1] : w->b_final);
        wt->gather(wt->ctx, w->b_layer[l]);
        if (n) block_fwd(w, l, wt, x, n, T, &s);
        wt->release(wt->ctx, w->b_layer[l]);
    }
    void *bufs[] = {s.lnh, s.q, s.k, s.v, s.att, s.ao, s.tmp, s.hid};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) os_k->free(bufs[k]);
    // ---- final LayerNorm ----
    wt->gather(wt->ctx, w->b_final);
    const float *lw = os_weight(wt, w->lnf_w), *lb = os_weight(wt, w->lnf_b);
    if (n && together) os_k->layernorm_fwd(x, NULL, NULL, x, lw, lb, R, d, 1e-5f);
    for (int64_t i = 0; n && !together && i < n; i++)
        os_k->layernorm_fwd(out[i], NULL, NULL, x + i * T * d, lw, lb, T, d, 1e-5f);
    wt->release(wt->ctx, w->b_final);
    if (!together) os_k->free(x);
}
