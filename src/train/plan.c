#include "train/plan.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "model/activations.h"
#include "model/loss.h"
#include "model/mean_rows.h"
#include "core/err.h"
#include "session/speech.h"
#include "zero/runtime.h"
#include <string.h>

// the runtime's padding of a bucket (zero/runtime.h)
static int64_t pad(int64_t n, int N) { return zr_padded(n, N); }

// the most AdamW moment elements any rank holds for a bucket (zr_part: its part within the trained range)
static int64_t moments(const os_bucket *k, int64_t np, int N, int stage) {
    int64_t most = 0;
    for (int r = 0; r < N; r++) {
        int64_t n = zr_part(k, np, stage, r, N, ZR_EXP_AVG).n;
        if (n > most) most = n;
    }
    return most;
}

// bucket b holds a matrix-product operand (os_param.gemm: under bf16 the runtime rounds or gathers it in bf16)
static int has_gemm(const os_registry *r, int b) {
    for (int i = r->b[b].first; i < r->b[b].first + r->b[b].count; i++)
        if (r->p[i].gemm) return 1;
    return 0;
}

void os_plan_compute(const os_model *m, int N, int stage, int64_t B, int64_t L, int ckpt, int64_t accum, int esz,
                     os_plan *p) {
    memset(p, 0, sizeof *p);
    const os_registry *r = &m->reg;
    // the stage's policies, as the runtime reads them (zero/policy.h)
    zr_policy pol = zr_policy_of(stage);
    int sharded = pol.params == ZR_PARAMS_SHARDED, scattered = pol.grads == ZR_GRADS_REDUCE_SCATTER;
    int64_t max_b = 0, max_tb = 0, layer_b = 0;
    // bytes per element of a gathered bucket (parameters sharded): bf16 gathers the buckets holding matrices at 2 bytes (their
    // fp32 tensors, a few hundredths, in pages of an otherwise untouched buffer); 4 otherwise
    int gl = 4, gh = 4, ga = 4;
    for (int b = 0; b < r->nb; b++) {
        int64_t np = pad(r->b[b].numel, N), s = np / N;
        p->params += 4 * (sharded ? s : np);
        if (esz && !sharded && has_gemm(r, b)) p->rounded += 2 * np;   // its bf16 copy, kept (zero/gather_bf16.c)
        if (np > max_b) max_b = np;
        if (!r->b[b].trainable) continue;
        if (np > max_tb) max_tb = np;
        p->grads += 4 * (scattered ? s : np);
        p->optim += 8 * moments(&r->b[b], np, N, stage);
    }
    if (m->nlayers > 0) layer_b = pad(r->b[m->b_layer[0]].numel, N);
    int64_t head_b = pad(r->b[m->b_head].numel, N), ad_b = m->b_adapter >= 0 ? pad(r->b[m->b_adapter].numel, N) : 0;
    int64_t norm_b = pad(r->b[m->b_norm].numel, N), emb_b = pad(r->b[m->b_embed].numel, N);
    int tied = m->b_head == m->b_embed;
    const os_bucket *k = r->b;   // frozen buckets open no gradient buffer
    int head_tr = k[m->b_head].trainable, ad_tr = m->b_adapter >= 0 && k[m->b_adapter].trainable;
    int layer_tr = m->nlayers > 0 && k[m->b_layer[0]].trainable, emb_tr = k[m->b_embed].trainable;
    if (esz) {
        gl = m->nlayers > 0 && has_gemm(r, m->b_layer[0]) ? 2 : 4, gh = has_gemm(r, m->b_head) ? 2 : 4;
        ga = m->b_adapter >= 0 && has_gemm(r, m->b_adapter) ? 2 : 4;
    }
    // runtime buffers at the two peaks: the head (head + adapter gathered and their gradients open, the next
    // bucket prefetched) and a layer's backward (layer + prefetched layer, its gradient; tied: embedding gradient)
    int64_t g_head = 0, g_bwd = 0;   // bytes
    if (sharded) g_head += gh * head_b + ga * ad_b + 4 * norm_b, g_bwd += 2 * gl * layer_b;
    // gradients reduce-scattered (stages 2-3): a gradient slice exists from the step's first reduction of its bucket
    // until AdamW (zero/runtime.c): at the head only the adapter's (and an untied head's) are there, in the layers'
    // backward all but the embedding's, which closes last; from the second micro-batch of an accumulation on, all
    int64_t sl_head = p->grads, sl_bwd = p->grads;
    if (scattered) {
        g_head += 4 * ((head_tr ? head_b : 0) + (ad_tr ? ad_b : 0));
        g_bwd += 4 * ((layer_tr ? layer_b : 0) + (tied && emb_tr ? emb_b : 0));
        if (accum <= 1) {
            sl_head = 4 * ((ad_tr ? ad_b / N : 0) + (!tied && head_tr ? head_b / N : 0));
            sl_bwd = p->grads - 4 * (emb_tr ? emb_b / N : 0);
        }
    }
    // activations: the forward/backward's arena, laid out from the same table that allocates it
    // (model/activations.c; it holds the head's buffers and the backward's together, reused by every micro-batch)
    os_act_sizes as;
    os_act_shape sh = {.B = B, .L = L, .npos = L, .train = 1, .recompute = ckpt, .rounds = esz ? 2 : 0};
    os_acts_sizes(m, &sh, &as);
    int64_t n = B * L, G = m->oc.G;
    int64_t batch = (2 * n * (G + 1) * 4 + 2 * n) / 4;                           // ids, labels, masks
    int64_t at_head = as.total / 4 + batch;
    int64_t at_bwd = at_head + K_ATTN_BQ * L;                                    // + attention dS (1 thread)
    int64_t a_head = 4 * at_head + g_head + sl_head, a_bwd = 4 * at_bwd + g_bwd + sl_bwd;
    if (a_head >= a_bwd) p->activations = 4 * at_head, p->gather = g_head, p->grads = sl_head;
    else p->activations = 4 * at_bwd, p->gather = g_bwd, p->grads = sl_bwd;
    // gradients all-reduced (stages 0-1), N > 1: after the backward each full gradient bucket is all-reduced in
    // place (the activation arena stays, kept for the next step); Open MPI 4.1's MPI_Allreduce holds half the buffer
    // as temporaries meanwhile (measured with 25-400 MB buckets on 2 and 4 ranks). Stages 2-3 reduce-scatter through
    // zero/coll_inplace.c's own ring, which allocates nothing.
    int64_t a_reduce = !scattered && N > 1 ? 4 * (max_tb / 2) : 0;
    if (4 * at_head + a_reduce > p->activations + p->gather) p->activations = 4 * at_head, p->gather = a_reduce;
    (void)max_b;
    if (esz) p->conv = os_plan_bf16(m, B, L, esz), p->activations += p->conv;
    p->speech = os_plan_speech(m, N, stage, B, esz), p->activations += p->speech;
    p->total = p->params + p->rounded + p->grads + p->optim + p->gather + p->activations;
}

int64_t os_plan_mean_rows_bytes(int64_t C) {
    return 8 * C * C + (8 + 4) * (int64_t)OS_MEAN_ROWS_READ * C + 8 * C;   // S, the read block in double and fp32, mean
}

int64_t os_plan_startup(const os_model *m, int N, int stage, const os_plan_src *src, int mean_resizing) {
    const os_registry *r = &m->reg;
    int sharded = zr_policy_of(stage).params == ZR_PARAMS_SHARDED;
    int64_t resident = 0, peak = 0;
    for (int b = 0; b < r->nb; b++) {
        const os_bucket *k = &r->b[b];
        int64_t np = pad(k->numel, N), s = sharded ? np / N : np, have = 0, bytes = 0, extra = 0;
        for (int i = k->first; i < k->first + k->count; i++) {
            have += src[i].have, bytes += src[i].have * src[i].bytes;
            if (!mean_resizing || !src[i].rows) continue;
            // the statistics read the whole checkpoint tensor: sharded, beyond this rank's slice (about 1/N of it)
            int64_t whole = sharded ? src[i].have * src[i].bytes / N * (N - 1) : 0;
            int64_t scratch = os_plan_mean_rows_bytes(r->p[i].shape[1]);
            if (scratch + whole > extra) extra = scratch + whole;
        }
        int64_t pages = have <= s ? bytes : (int64_t)((double)bytes * (double)s / (double)have);   // this rank's part
        if (resident + 4 * s + pages + extra > peak) peak = resident + 4 * s + pages + extra;
        resident += 4 * s + pages;
    }
    return peak;
}

int64_t os_plan_bf16(const os_model *m, int64_t B, int64_t L, int esz) {
    int64_t n = B * L, C = m->C, F = m->F, HD = m->H * m->D, A = m->oc.audio_vocab, rows = k_xent_chunk_rows(m->V, n, m->logits_rows);
    // the weights are rounded ahead (bound by the runtime) and the head's gradients into its stash (in the
    // activations' arena, model/loss.h): what the products round into scratch is the rest of the activations: as
    // a, a layer's inputs and output gradients, a logits chunk's rows of the norm output and (evaluation) of the
    // adapter's input; as b, a layer's inputs and the stashed rows of the norm output
    int64_t a = 0, b = 0;
    int64_t la[] = {n * F, n * C, n * HD, rows * A}, lb[] = {n * F, n * C, n * HD};
    for (size_t i = 0; i < sizeof la / sizeof la[0]; i++) a = la[i] > a ? la[i] : a;
    for (size_t i = 0; i < sizeof lb / sizeof lb[0]; i++) b = lb[i] > b ? lb[i] : b;
    int64_t widened = 0;   // the sgemm path (esz 4) widens each bf16 operand to fp32 for its product (kernels/matmul.c):
    if (esz == 4) {        // the largest matrix (a weight, whole or a logits chunk's rows) and the head's stash
        const os_registry *r = &m->reg;
        for (int i = 0; i < r->np; i++)
            if (r->p[i].gemm && r->p[i].numel > widened) widened = r->p[i].numel;
        widened += os_acts_stash_rows(m, n) * m->V;
    }
    return esz * (a + b) + 4 * widened;   // bf16 copies (oneDNN, esz 2) or fp32 ones holding the rounded values (sgemm, 4)
}

int64_t os_plan_bf16_stash(const os_model *m, int64_t B, int64_t L, int esz) {
    os_act_sizes with, without;
    os_act_shape sh = {.B = B, .L = L, .npos = L, .train = 1, .rounds = esz ? 2 : 0};
    os_acts_sizes(m, &sh, &with);
    sh.rounds = 0;
    os_acts_sizes(m, &sh, &without);   // (the head's group: the layers' bf16 activations are in theirs)
    return 4 * (with.floats[OS_ACT_HEAD] - without.floats[OS_ACT_HEAD]);
}

int os_plan_speech_config(const char *encoder, os_omni_config *oc, os_whisper_config *wc) {
    static const struct {
        const char *name;
        os_whisper_config c;   // d_model, layers, heads, ffn, mel bins, max_source_positions (the released configs)
    } P[] = {{"whisper-small", {768, 12, 12, 3072, 80, 1500}},
             {"whisper-medium", {1024, 24, 16, 4096, 80, 1500}},
             {"whisper-large-v3", {1280, 32, 20, 5120, 128, 1500}}};
    size_t i = 0;
    while (i < sizeof P / sizeof P[0] && strcmp(encoder, P[i].name)) i++;
    if (i < sizeof P / sizeof P[0]) *wc = P[i].c;
    else {
        char path[4200];
        snprintf(path, sizeof path, "%s/config.json", encoder);
        if (os_hub_id_check("--speech_encoder", encoder) < 0 || os_whisper_config_load(path, wc) < 0)
            return os_err_ctx("--speech_encoder (a Whisper directory, or whisper-small, whisper-medium, whisper-large-v3)");
    }
    if (oc->G < 1) return os_errf("--speech_encoder: speech input needs --model_type slam_omni (code_layer >= 1)");
    if (oc->speech_dim && oc->speech_dim != wc->d_model)
        return os_errf("--speech_encoder %s: d_model %d, but the model's projector takes encoder_dim %lld (slam_omni.json)",
                       encoder, wc->d_model, (long long)oc->speech_dim);
    oc->speech_dim = wc->d_model;
    return 0;
}

int64_t os_plan_speech(const os_model *m, int N, int stage, int64_t B, int esz) {
    const os_whisper *w = &m->enc;
    int64_t T_s = os_speech_positions(m);
    if (!w->nlayers || m->b_proj < 0 || T_s < 1) return 0;
    int64_t T_mel = os_whisper_mel_frames(w), T = os_whisper_out_frames(T_mel), d = w->d;
    os_proj_dims pd = {.k = m->oc.proj_k, .d = d, .hidden = m->oc.proj_hidden, .C = m->C, .kind = m->oc.proj_kind};
    // kept through the step (train/speech.c): mel, feat, act, proj, dproj per sample; the projector's backward scratch
    int64_t kept = B * (w->n_mels * T_mel + T * d + T_s * os_projector_act_floats(&pd) + 2 * T_s * m->C) +
                   T_s * os_projector_scratch_floats(&pd);
    // the encoder's forward (model/whisper.c), over the micro-batch's B clips at once: the front's conv outputs, then
    // the blocks' scratch (q, k, v, the attention output, a norm's output and the products' [B*T, d], the stats, the
    // MLP's [B*T, F]; under bf16 the norm output's bf16 store, 2 bytes an element); the frames [B*T, d] in scratch
    // when the outputs are not one block (rows without speech, cached features between)
    int64_t front = B * (d * T_mel + d * T), block = 5 * B * T * d + os_k->attention_stats_floats(B, T, w->H) + B * T * w->F;
    if (esz) block += (2 * B * T * d + 3) / 4;
    block += B * T * d;
    front += B * T * d;
    int64_t gathered = stage == 3 ? 2 * pad(m->reg.b[w->b_layer[0]].numel, N) : 0;   // a block + the prefetched one
    return 4 * (kept + (front > block ? front : block) + gathered);
}

int64_t os_plan_row_total(const os_model *m, const os_plan_fit *f, int64_t L, int esz, const os_plan_src *src,
                          int mean_resizing) {
    os_plan p;
    os_plan_compute(m, f->nranks, f->stage, f->batch, L, f->recompute, f->accum, esz, &p);
    int64_t up = os_plan_startup(m, f->nranks, f->stage, src, mean_resizing);
    return (p.total > up ? p.total : up) + OS_PLAN_BASELINE_BYTES;
}

// the first configuration of stages 0-3 x recomputation off/on that fits, with f's ranks and batch
static int fits_any_stage(const os_model *m, os_plan_fit *f, int64_t L, int esz, const os_plan_src *src, int mr,
                          int64_t dev) {
    for (f->stage = 0; f->stage <= 3; f->stage++)
        for (f->recompute = 0; f->recompute <= 1; f->recompute++)
            if ((f->total = os_plan_row_total(m, f, L, esz, src, mr)) <= dev) return 1;
    return 0;
}

int os_plan_suggest(const os_model *m, const os_plan_fit *asked, int64_t L, int esz, const os_plan_src *src,
                    int mean_resizing, int64_t dev, os_plan_fit *out) {
    os_plan_fit f = *asked;
    for (; f.batch >= 1; f.accum *= 2, f.batch = f.batch > 1 ? (f.batch + 1) / 2 : 0)   // the same global batch
        if (fits_any_stage(m, &f, L, esz, src, mean_resizing, dev)) return *out = f, 1;
    int64_t global = asked->nranks * asked->batch * asked->accum;   // samples per optimizer step, kept where it divides
    f = (os_plan_fit){.nranks = asked->nranks, .batch = 1};
    for (f.nranks *= 2; f.nranks <= 4096; f.nranks *= 2) {
        f.accum = global / f.nranks > 1 ? global / f.nranks : 1;
        if (fits_any_stage(m, &f, L, esz, src, mean_resizing, dev)) return *out = f, 1;
    }
    return 0;
}

int os_plan_preset(const char *name, os_qwen2_config *c) {
    static const struct {
        const char *name;
        int hidden, inter, layers, heads, kv, vocab, tied;
    } P[] = {
        {"qwen2.5-0.5b", 896, 4864, 24, 14, 2, 151936, 1},
        {"qwen2.5-1.5b", 1536, 8960, 28, 12, 2, 151936, 1},
        {"qwen2.5-3b", 2048, 11008, 36, 16, 2, 151936, 1},
        {"qwen2.5-7b", 3584, 18944, 28, 28, 4, 152064, 0},
    };
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        if (strcmp(name, P[i].name)) continue;
        memset(c, 0, sizeof *c);
        strcpy(c->model_type, "qwen2");
        c->hidden_size = P[i].hidden, c->intermediate_size = P[i].inter, c->num_hidden_layers = P[i].layers;
        c->num_attention_heads = P[i].heads, c->num_key_value_heads = P[i].kv, c->head_dim = P[i].hidden / P[i].heads;
        c->vocab_size = P[i].vocab, c->tie_word_embeddings = P[i].tied, c->max_position_embeddings = 32768;
        c->rms_norm_eps = 1e-6, c->rope_theta = 1000000.0, c->bos_token_id = -1, c->eos_token_id = 151643;
        strcpy(c->torch_dtype, "bfloat16");   // the released checkpoints' (and what --torch_dtype auto trains in)
        return 0;
    }
    return -1;
}
