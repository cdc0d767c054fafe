// The activations and scratch of the decoder's forward and backward (model/forward.h), in one arena allocated
// once per run and reused by every micro-batch (grown when one needs more; a fresh calloc'd buffer per
// micro-batch cost ~6% of a step in page faults). One table (os_acts_layout in activations.c) lists every buffer
// and its size from the model and the micro-batch shape; the allocator lays the arena out from it and the memory
// plan (train/plan.c) sums it, so the two cannot disagree.
#pragma once
#include "model/layer.h"
#include "model/loss.h"

typedef struct {
    int64_t B, L;     // micro-batch: samples, positions (N = B*L rows)
    int64_t npos;     // RoPE positions needed (L; with a KV cache its capacity)
    int64_t rowpos;   // 1: RoPE tables per row, [B, L, D/2], from the input's positions (packed rows: os_acts_positions);
                      // 0: one table [npos, D/2] for positions 0..npos-1, filled by os_acts_prepare (int64_t: the
                      // struct has no padding, os_acts_prepare compares shapes with memcmp)
    int train;        // backward buffers (layer scratch, dx, dhn)
    int recompute;    // training keeps one layer's activations (recomputed in the backward), else every layer's
    int64_t rounds;   // training with products that round their inputs (bf16): 2, the bytes of an element of the
                      // loss's bf16 stash (model/loss.h), else 0
} os_act_shape;

// floats (4-byte elements) per group of the table
typedef enum { OS_ACT_LAYERS, OS_ACT_SCRATCH, OS_ACT_RESID, OS_ACT_HEAD, OS_ACT_GRAD, OS_ACT_NGROUPS } os_act_group;
//   LAYERS: the kept layers' saved activations (os_layer_act, one or every layer)
//   SCRATCH: the layer backward scratch (os_layer_ctx), the RoPE tables and positions, and the micro-batch's inputs
//            uploaded for the kernels (ids, key mask, segments)
//   RESID: the residual stream, layer inputs xs[0..nlayers] [N, C] each
//   HEAD: the final norm's output hn [N, C] and rstd [N], its gradient dhn [N, C] (training), the loss's buffers
//         (os_loss, targets included)
//   GRAD: dx [N, C], the residual gradient of the backward
typedef struct {
    int64_t floats[OS_ACT_NGROUPS];
    int64_t total;    // bytes of the arena (alignment included)
} os_act_sizes;

typedef struct {
    const os_model *m;
    unsigned char *arena;
    int64_t cap;              // arena bytes
    os_act_shape shape;       // the layout in place (B 0: none yet)
    float **xs;               // [nlayers + 1] layer inputs [N, C]; xs[nlayers] the last layer's output
    os_layer_act *acts;       // [nacts]
    int64_t nacts;
    int64_t live;             // recomputation (nacts 1): the layer whose activations acts[0] still holds from the
                              // forward (the last one), so the backward need not recompute it; -1: none
    os_layer_ctx ctx;         // the layer scratch and RoPE tables (per-call fields set by the forward)
    float *cos_t, *sin_t;     // [npos, D/2], or [B, L, D/2] with shape.rowpos
    int32_t *pos;             // [npos] the RoPE tables' positions 0..npos-1, or [B, L] the rows' (rowpos)
    // the micro-batch's inputs on the backend (os_acts_upload; the host keeps its own): ids [B, G+1, L], keymask
    // and seg [B, L] (the call's: its buffer, or NULL when the micro-batch has none), their buffers
    int32_t *ids, *seg_buf;
    uint8_t *keymask_buf;
    const uint8_t *keymask;
    const int32_t *seg;
    float *hn, *rstd;         // the final norm's output [N, C] (the forward's end, the loss's input) and its rstd [N]
    float *dhn;               // [N, C] dL/dhn (training: the loss writes it, the backward starts from it)
    int64_t ny;               // ints of loss.yh
    os_loss loss;
    float *dx;                // [N, C]
} os_model_acts;

void os_acts_sizes(const os_model *m, const os_act_shape *s, os_act_sizes *out);
// the rows of the loss's bf16 stash the table lays out for N rows (training with rounding products); the layout
// writes it into os_loss.st_cap
int64_t os_acts_stash_rows(const os_model *m, int64_t N);
void os_acts_init(os_model_acts *a, const os_model *m);
void os_acts_free(os_model_acts *a);
// lay the buffers out for shape s (growing the arena when needed; RoPE tables filled unless s->rowpos). Every buffer
// is on the backend's memory (os_k->alloc) but the loss's host copy of its targets (loss.yh)
void os_acts_prepare(os_model_acts *a, const os_act_shape *s);
// shape.rowpos: the RoPE tables of each row's positions pos [B, L] (host; uploaded)
void os_acts_positions(os_model_acts *a, const int32_t *pos);
// the micro-batch's ids [B, R, L] (R <= G+1), keymask and seg [B, L] (each NULL: none) into a->ids, a->keymask,
// a->seg (NULL for a missing one); after os_acts_prepare for its shape
void os_acts_upload(os_model_acts *a, int64_t R, const int32_t *ids, const uint8_t *keymask, const int32_t *seg);
