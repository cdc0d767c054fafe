// The SLAM-Omni loss over the final norm's output hn [N, C] (os_model_forward's end, model/forward.h): lm_head, the
// text cross-entropy over logits[:, :T], the group-decode adapter over the audio columns logits[:, T:T+A] (layer
// shift: layer g's own columns T+g*A.., no adapter) and one cross-entropy per audio layer, all next-token shifted
// (position p predicts p+1). Forward and backward are fused and computed in chunks of rows, so the [N, V] logits
// and their gradient never exist whole.
// Row classes: which loss terms a row has targets in, and so which lm_head columns it needs. The text cross-entropy
// reads columns [0, T), the audio ones [T, V) (V = T + A through the adapter, or T + G*A with the layer shift:
// model/omni.c sizes V so, so every column is read by some loss). A row without a text target never needs the
// 152000 text columns, one without an audio target neither the audio columns nor the adapter (in SLAM-Omni: most
// answer positions are past the text's eot, audio only); a row without any target is skipped.
// One micro-batch, as train/step.c calls it (train/evaluate.c through it; inference calls os_loss_logits only):
//   os_loss_open      lm_head and the adapter gathered, with gradients their gradient scopes opened; resolved
//   os_loss_targets   the targets from the labels, each term's gradient scale, the rows with a target grouped by
//                     class (hn's rows reordered in place): the rows (os_loss_rows)
//   os_loss_compute   the rows' losses, with gradients the weight gradients and dL/dhn (balanced, the step gives
//                     it instead the rows its rank's exchange made: its kept rows and other ranks' moved to it;
//                     os_loss_row_costs tells the exchange what a row of each class costs)
//   os_loss_close     dL/dhn back at the rows' places; the buckets released, the scopes closed
//   os_loss_read      the sums and correct counts to the host: waits for the loss's kernels
// bf16 training (the backend's products round their inputs, os_k->bf16): each chunk's dlogits (and the adapter's
// output gradient and input) are rounded once into the stash, stored as bf16, and the products that read them run
// once over the stash's rows (up to OS_LOSS_STASH_K), not once per chunk; with lm_head trained, the rows' hn is
// rounded once (hnh) for its two products, the logits and lm_head's weight gradient.
#pragma once
#include "model/omni.h"
#include "model/weights.h"

// the row classes: targets in the text and the audio terms, the text term only, the audio terms only
enum { OS_LOSS_TA, OS_LOSS_T, OS_LOSS_A, OS_LOSS_NCLS };

// per loss term (0 text, 1+g audio layer g): summed CE, valid targets, correct argmax
typedef struct {
    double sum[OS_MAX_G + 1];
    int64_t count[OS_MAX_G + 1], correct[OS_MAX_G + 1];
} os_loss_sums;

// Rows to compute, grouped by class: class c is cnt[c] rows, after the earlier classes'. Row r is hn[r] with the
// targets y[k * ldy + r] of each loss term k < nterms, and belongs to owner[r] (NULL: every row to owner 0): its
// cross-entropies take that owner's gradient scales scale[owner * (OS_MAX_G + 1) + k] and add into its
// sums[owner]. A row moved here from another rank is one more owner (train/head_balance.c), computed like any other.
typedef struct {
    int64_t cnt[OS_LOSS_NCLS];
    int nterms;                // loss terms (G+1), 0: no losses (logits only)
    const float *hn;           // [n, C]
    const int32_t *y;          // [nterms, ldy] (the backend's memory)
    const int32_t *yh;         // the same targets on the host (what code on the host reads: the balanced loss)
    int64_t ldy;
    const int *owner;          // [n] or NULL
    const float *scale;        // [owners, OS_MAX_G + 1]
    os_loss_sums *sums;        // [owners], on the backend's memory
    float *dhn;                // [n, C]: dL/dhn of each row, written with L->dh
    int fixed;                 // the rows are the micro-batch's, in order, their logits wanted: they cannot move
} os_loss_rows;

// The loss of the model: its buffers, laid out with the activations (model/activations.c; sizes from the
// micro-batch's rows N: rows = k_xent_chunk_rows(V, N, m->logits_rows)), and the micro-batch's weights, gradients
// and row order between os_loss_open and os_loss_close.
typedef struct {
    const os_model *m;
    // the micro-batch (os_loss_open): lm_head [V, C]; adapter_w [G*A, A] (views as os_weights.tensor gives them:
    // fp32, or under bf16 the owner's bf16 copies), adapter_b [G*A] (data NULL / NULL: no adapter); their
    // gradients, accumulated (+=; NULL: not computed: frozen, or no gradients). lm_head trains on rows [row0, V)
    // only (--trainable_embed_rows): the rest of its gradient is not computed
    os_tensor lm_head, adapter_w;
    const float *adapter_b;
    float *dlm_head, *dadapter_w, *dadapter_b;
    int64_t row0;
    int64_t N;                 // the micro-batch's rows B*L: the buffers' capacity (logits chunk, stash)
    int train;                 // gradients (their scopes open)
    int dh;                    // compute dL/dhn (something below the loss is trained; training only)
    float *dump;               // NULL, or receives every row's lm_head logits [N, V] (the rows in their order; host
                               //   memory: each chunk downloaded, a wait per chunk: a debugging dump)
    float scale[OS_MAX_G + 1]; // each term's gradient scale dscale * weight / count (0 without gradients)
    int64_t count[OS_MAX_G + 1];   // each term's targets (host)
    int32_t *order;            // os_loss_targets' row order on the backend: [n] hn's row of row i of the rows, then
    int64_t n;                 //   [N] row r's place among them or -1 (the inverse; NULL: every row, in order)
    int64_t st_first, st_n, st_e, st_cap;   // the bf16 stash: rows [first, first + n) of the rows computed are in
                                            //   it, e bytes an element (2: bf16; 0: no stash), cap rows at most (as
                                            //   the activations' layout made it)
    // buffers: logits [rows, V] (at least [N, C]: also the scratch of the row order), al [rows, G*A] (adapter),
    // y [(G+1), N] targets; the stash of st_cap rows (os_acts_stash_rows, model/activations.h) while
    // training with rounding products (bf16, os_act_shape.rounds): dls [srows, V] (dlogits), als [srows, G*A] (adapter output gradient), ain
    // [srows, A] (adapter input), else NULL. sums: the loss sums on the backend's memory (the cross-entropy adds into
    // them), allocated with the activations (os_acts_init); yh: y's copy on the host (the targets are made, ordered
    // and classed there, then uploaded)
    // hnh [N, C]: under bf16 training with lm_head trained, the computed rows of hn rounded once (cast) as
    // os_loss_compute starts, read by the logits and lm_head weight-gradient products (else NULL: they read hn)
    float *logits, *al;
    int32_t *y, *yh;
    void *dls, *als, *ain, *hnh;
    os_tensor hv;              // the rows' hn as the products read it (os_loss_compute: r->hn, or hnh's rows)
    os_loss_sums *sums;
} os_loss;

// the rows the weight-gradient products of the stash take at once, at least (the activations' layout sizes the
// stash from it in whole logits chunks: os_acts_stash_rows, model/activations.h)
#define OS_LOSS_STASH_K 512

// Opens the loss of a micro-batch of N rows: lm_head and the adapter gathered (w), with g their gradient scopes
// opened and their gradients resolved; dh: dL/dhn wanted (g only); dump: os_loss.dump
void os_loss_open(os_loss *L, const os_weights *w, const os_grads *g, int64_t N, int dh, float *dump);
// The rows of the micro-batch with targets, from labels [B, R, Lp] (host; raw labels or -100) shifted by one
// position: each term's count and gradient scale (dscale * weight / count with gradients), then, unless L->dump,
// the rows with a target moved to the front of hn [N = B*Lp, C] grouped by class (in place; rows without a target
// are skipped); with L->dump every row, in order, in the first class. r's dL/dhn go to dhn [N, C].
void os_loss_targets(os_loss *L, const int32_t *labels, int64_t B, int64_t R, int64_t Lp, float dscale, float *hn,
                     float *dhn, os_loss_rows *r);
// r's losses into r->sums, with gradients the weight gradients (+=) and with L->dh r->dhn; logits chunks of
// k_xent_chunk_rows(V, min(n, L->N), m->logits_rows) rows at most
void os_loss_compute(os_loss *L, const os_loss_rows *r);
// dhn's rows back at their places (the rows without a target zero); the buckets released and the gradient scopes
// closed (the gathered buckets first: a closing scope allocates its gradient slice, which then takes their pages)
void os_loss_close(os_loss *L, const os_weights *w, const os_grads *g, float *dhn);
// the micro-batch's sums and correct counts into s, its counts as os_loss_targets made them
void os_loss_read(const os_loss *L, os_loss_sums *s);

// the work of one row of each class of the open loss: its products (logits, dh, dW, the adapter's three) in
// multiply-adds, and the cross-entropy's passes over its columns; at least 1 (the balanced head's plan, the same on every rank)
void os_loss_row_costs(const os_loss *L, double cost[OS_LOSS_NCLS]);

// Logits only (no targets, no gradients; inference and tests): lm_head gathered, the logits of hn [B*Lp, C] into
// out (host memory: downloaded), every row [B*Lp, V], or with last each sample's last row [B, V]; released
void os_loss_logits(os_loss *L, const os_weights *w, const float *hn, int64_t B, int64_t Lp, int last, float *out);
