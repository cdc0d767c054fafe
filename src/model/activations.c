#include "model/activations.h"
#include "core/alloc.h"
#include "core/err.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include <stddef.h>
#include <string.h>

// Under AddressSanitizer every buffer is followed by a poisoned gap and everything outside the live buffers is
// poisoned, so an overflow from one buffer into the next is reported as it was with one allocation per buffer.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
enum { ALIGN = 64, REDZONE = 64 };
#else
enum { ALIGN = 64, REDZONE = 0 };
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

typedef struct {
    os_model_acts *a;   // NULL: sizes only
    int64_t off;        // bytes laid out so far
    os_act_sizes *sz;
} layout;

// one table entry: n elements of 4 bytes in group g; when laying out, its address goes to the pointer at dst (a
// float * or int32_t *, written by memcpy: one helper for both pointer types)
static void put(layout *lo, os_act_group g, void *dst, int64_t n) {
    void *at = n > 0 && lo->a ? lo->a->arena + lo->off : NULL;
    if (lo->a) memcpy(dst, &at, sizeof at);
    if (n <= 0) return;
    if (at) ASAN_UNPOISON_MEMORY_REGION(at, (size_t)(4 * n));
    lo->off += (4 * n + ALIGN - 1) / ALIGN * ALIGN + REDZONE;
    lo->sz->floats[g] += n;
}

// whether LoRA's dropout reads the input of a module t0..t1 (an fp32 elementwise kernel: that input stays fp32)
static int lora_dropout_reads(const os_model *m, int t0, int t1) {
    if (m->oc.lora.rank <= 0 || m->oc.lora.dropout <= 0) return 0;
    for (int t = t0; t <= t1; t++)
        if (m->oc.lora.targets >> t & 1) return 1;
    return 0;
}

// the loss's bf16 stash in rows (model/loss.h): the fewest whole logits chunks of `rows` holding OS_LOSS_STASH_K
// rows (the weight-gradient products' depth: 642 rows at V = 156160, chunks of 214), at most N; one chunk when
// neither lm_head nor the adapter trains (nothing to gather rows for: each chunk's own rows, dh and dA)
static int64_t stash_rows(const os_model *m, int64_t N, int64_t rows) {
    int64_t k = (OS_LOSS_STASH_K + rows - 1) / rows * rows;
    int wgrad = m->reg.b[m->b_head].trainable || (m->b_adapter >= 0 && m->reg.b[m->b_adapter].trainable);
    if (!wgrad) k = rows;
    return k < N ? k : N;
}

int64_t os_acts_stash_rows(const os_model *m, int64_t N) { return stash_rows(m, N, k_xent_chunk_rows(m->V, N, m->logits_rows)); }

// THE table: every buffer of the forward/backward and its size
static void table(const os_model *m, const os_act_shape *s, layout *lo) {
    os_model_acts *a = lo->a, dummy = {0};
    if (!a) a = &dummy;   // sizes only: the destinations are scratch
    os_layer_act la_dummy = {0};
    int64_t B = s->B, L = s->L, N = B * L, C = m->C, HD = m->H * m->D, KD = m->KH * m->D, F = m->F, V = m->V;
    int64_t G = m->oc.G, A = m->oc.audio_vocab, nl = m->nlayers, r = m->oc.lora.rank, tr = s->train;
    int64_t nacts = tr && !s->recompute ? nl : 1, rows = k_xent_chunk_rows(V, N, m->logits_rows);
    int64_t wide = F > C ? F : C;
    if (HD > wide) wide = HD;
    // LAYERS; ln1, ln2 and act stored bf16 (model/layer.h) when training rounds them in every consumer
    int64_t e = s->rounds, h1 = tr && e && !lora_dropout_reads(m, OS_LORA_Q, OS_LORA_V);
    int64_t h2 = tr && e && !lora_dropout_reads(m, OS_LORA_GATE, OS_LORA_UP), ha = tr && e && !lora_dropout_reads(m, OS_LORA_DOWN, OS_LORA_DOWN);
    for (int64_t l = 0; l < nacts; l++) {
        os_layer_act *x = lo->a ? &a->acts[l] : &la_dummy;
        put(lo, OS_ACT_LAYERS, &x->ln1, h1 ? 0 : N * C), put(lo, OS_ACT_LAYERS, &x->rstd1, N);
        put(lo, OS_ACT_LAYERS, &x->ln1h, h1 * (N * C * e + 3) / 4);   // in 4-byte units
        put(lo, OS_ACT_LAYERS, &x->ln2h, h2 * (N * C * e + 3) / 4), put(lo, OS_ACT_LAYERS, &x->acth, ha * (N * F * e + 3) / 4);
        put(lo, OS_ACT_LAYERS, &x->q, N * HD), put(lo, OS_ACT_LAYERS, &x->k, N * KD), put(lo, OS_ACT_LAYERS, &x->v, N * KD);
        put(lo, OS_ACT_LAYERS, &x->att, os_k->attention_stats_floats(B, L, m->H)), put(lo, OS_ACT_LAYERS, &x->ao, N * HD);
        put(lo, OS_ACT_LAYERS, &x->h, N * C), put(lo, OS_ACT_LAYERS, &x->ln2, h2 ? 0 : N * C), put(lo, OS_ACT_LAYERS, &x->rstd2, N);
        put(lo, OS_ACT_LAYERS, &x->gate, N * F), put(lo, OS_ACT_LAYERS, &x->up, N * F), put(lo, OS_ACT_LAYERS, &x->act, ha ? 0 : N * F);
        for (int t = 0; t < OS_LORA_N; t++) {   // LoRA's u: bf16 under bf16 training (its readers are products)
            int64_t nu = r > 0 && (m->oc.lora.targets >> t & 1) ? N * r : 0;
            put(lo, OS_ACT_LAYERS, &x->lora_u[t], tr && e ? 0 : nu), put(lo, OS_ACT_LAYERS, &x->lora_uh[t], tr && e ? (nu * e + 3) / 4 : 0);
        }
    }
    // SCRATCH
    os_layer_ctx *c = &a->ctx;
    int64_t npos = s->rowpos ? N : s->npos;
    put(lo, OS_ACT_SCRATCH, &a->cos_t, npos * m->D / 2), put(lo, OS_ACT_SCRATCH, &a->sin_t, npos * m->D / 2);
    put(lo, OS_ACT_SCRATCH, &c->dact, tr * N * F), put(lo, OS_ACT_SCRATCH, &c->dgate, tr * N * F);
    put(lo, OS_ACT_SCRATCH, &c->dup, tr * N * F), put(lo, OS_ACT_SCRATCH, &c->dln, tr * N * C);
    put(lo, OS_ACT_SCRATCH, &c->dao, tr * N * HD), put(lo, OS_ACT_SCRATCH, &c->dq, tr * N * HD);
    put(lo, OS_ACT_SCRATCH, &c->dk, tr * N * KD), put(lo, OS_ACT_SCRATCH, &c->dv, tr * N * KD);
    put(lo, OS_ACT_SCRATCH, &c->lora_du, tr * N * r);
    for (int64_t l = 0; l < nacts; l++) {   // the stored activations are produced in the backward's scratch
        os_layer_act *x = lo->a ? &a->acts[l] : &la_dummy;
        if (h1) x->ln1 = c->dln;
        if (h2) x->ln2 = c->dln;
        if (ha) x->act = c->dact;
        for (int t = 0; t < OS_LORA_N; t++)
            if (x->lora_uh[t]) x->lora_u[t] = c->lora_du;
    }
    put(lo, OS_ACT_SCRATCH, &c->lora_xd, tr && r > 0 && m->oc.lora.dropout > 0 ? N * wide : 0);
    put(lo, OS_ACT_SCRATCH, &a->pos, npos), put(lo, OS_ACT_SCRATCH, &a->ids, N * (G + 1));
    put(lo, OS_ACT_SCRATCH, &a->seg_buf, N), put(lo, OS_ACT_SCRATCH, &a->keymask_buf, (N + 3) / 4);   // (4-byte units)
    // RESID
    float *x_dummy;
    for (int64_t l = 0; l <= nl; l++) put(lo, OS_ACT_RESID, lo->a ? &a->xs[l] : &x_dummy, N * C);
    // HEAD
    os_loss *h = &a->loss;
    put(lo, OS_ACT_HEAD, &a->hn, N * C), put(lo, OS_ACT_HEAD, &a->rstd, N), put(lo, OS_ACT_HEAD, &h->logits, rows * V > N * C ? rows * V : N * C);
    int ad = m->b_adapter >= 0;
    put(lo, OS_ACT_HEAD, &h->al, ad ? rows * G * A : 0);
    put(lo, OS_ACT_HEAD, &a->dhn, tr * N * C), put(lo, OS_ACT_HEAD, &h->y, (G + 1) * N);
    int64_t sr = tr && e ? stash_rows(m, N, rows) : 0;   // rounded rows (e: bytes of each element)
    h->st_cap = sr;   // the loss's stash capacity, as laid out here
    put(lo, OS_ACT_HEAD, &h->dls, (sr * V * e + 3) / 4);   // in 4-byte units
    put(lo, OS_ACT_HEAD, &h->als, ad ? (sr * G * A * e + 3) / 4 : 0), put(lo, OS_ACT_HEAD, &h->ain, ad ? (sr * A * e + 3) / 4 : 0);
    int64_t hr = tr && e && m->reg.b[m->b_head].trainable;   // hn's rows rounded once (model/loss.h hnh)
    put(lo, OS_ACT_HEAD, &h->hnh, hr * (N * C * e + 3) / 4);
    // GRAD
    put(lo, OS_ACT_GRAD, &a->dx, tr * N * C);
    lo->sz->total = lo->off;
}

void os_acts_sizes(const os_model *m, const os_act_shape *s, os_act_sizes *out) {
    memset(out, 0, sizeof *out);
    layout lo = {.sz = out};
    table(m, s, &lo);
}

void os_acts_init(os_model_acts *a, const os_model *m) {
    memset(a, 0, sizeof *a);
    a->m = m;
    a->live = -1;
    a->xs = os_alloc(sizeof(float *) * (size_t)(m->nlayers + 1), "layer inputs");
    a->acts = os_alloc(sizeof(os_layer_act) * (size_t)(m->nlayers > 0 ? m->nlayers : 1), "layer activations");
    a->loss.m = m;
    a->loss.sums = os_k->alloc((int64_t)sizeof(os_loss_sums), "loss sums");
}

void os_acts_upload(os_model_acts *a, int64_t R, const int32_t *ids, const uint8_t *keymask, const int32_t *seg) {
    int64_t N = a->shape.B * a->shape.L;
    OS_ASSERT(R <= a->m->oc.G + 1);
    os_k->upload(a->ids, ids, (int64_t)sizeof(int32_t) * N * R);
    a->keymask = keymask ? a->keymask_buf : NULL, a->seg = seg ? a->seg_buf : NULL;
    if (keymask) os_k->upload(a->keymask_buf, keymask, N);
    if (seg) os_k->upload(a->seg_buf, seg, (int64_t)sizeof(int32_t) * N);
}

void os_acts_free(os_model_acts *a) {
    if (a->arena) ASAN_UNPOISON_MEMORY_REGION(a->arena, (size_t)a->cap);
    os_k->free(a->arena), os_free(a->xs), os_free(a->acts), os_free(a->loss.yh);
    os_k->free(a->loss.sums);
    memset(a, 0, sizeof *a);
}

void os_acts_prepare(os_model_acts *a, const os_act_shape *s) {
    if (a->arena && !memcmp(&a->shape, s, sizeof *s)) return;
    const os_model *m = a->m;
    os_act_sizes sz;
    os_acts_sizes(m, s, &sz);
    if (sz.total > a->cap) {
        if (a->arena) ASAN_UNPOISON_MEMORY_REGION(a->arena, (size_t)a->cap);
        os_k->free(a->arena);
        a->arena = os_k->alloc(sz.total, "activations");
        a->cap = sz.total;
    }
    int64_t ny = (m->oc.G + 1) * s->B * s->L;   // the loss's targets on the host
    if (ny > a->ny) os_free(a->loss.yh), a->loss.yh = os_alloc(sizeof(int32_t) * (size_t)ny, "loss targets (host)"), a->ny = ny;
    ASAN_POISON_MEMORY_REGION(a->arena, (size_t)a->cap);   // the layout below unpoisons its buffers
    memset(&sz, 0, sizeof sz);
    layout lo = {.a = a, .sz = &sz};
    table(m, s, &lo);
    a->shape = *s;
    a->nacts = s->train && !s->recompute ? m->nlayers : 1;
    a->live = -1;
    if (s->rowpos) return;
    int32_t *pos = os_alloc(sizeof(int32_t) * (size_t)(s->npos > 0 ? s->npos : 1), "positions");
    for (int64_t i = 0; i < s->npos; i++) pos[i] = (int32_t)i;
    os_k->upload(a->pos, pos, (int64_t)sizeof(int32_t) * s->npos);
    os_k->rope_table(a->cos_t, a->sin_t, a->pos, s->npos, m->D, (float)m->cfg.rope_theta);
    os_free(pos);
}

void os_acts_positions(os_model_acts *a, const int32_t *pos) {
    const os_model *m = a->m;
    int64_t L = a->shape.L, half = L * m->D / 2;
    os_k->upload(a->pos, pos, (int64_t)sizeof(int32_t) * a->shape.B * L);
    for (int64_t b = 0; b < a->shape.B; b++)
        os_k->rope_table(a->cos_t + b * half, a->sin_t + b * half, a->pos + b * L, L, m->D, (float)m->cfg.rope_theta);
}
