// Per-rank memory of a training configuration, computed from the parameter registry and the table of the
// forward/backward's buffers (os_acts_sizes, model/activations.h: the one the allocator lays out): model state by stage, gather/gradient
// buffers of the sharding runtime, and activations with or without recomputation. Frozen buckets
// (src/model/freeze.h) hold no gradient and no optimizer state.
#pragma once
#include "model/omni.h"
#include <stdint.h>

typedef struct {
    int64_t params, optim;             // permanent model state on one rank
    int64_t rounded;                   // bf16, stage 0-2: the rounded copies of the buckets holding matrices (kept)
    int64_t grads;                     // gradients held at the peak (stage 2/3: the slices reduced so far)
    int64_t gather;                    // gathered parameter buckets + full gradient buckets at the peak
    int64_t activations;               // activations + scratch at the peak (bf16: including conv)
    int64_t conv;                      // bf16: the activations rounded for the products (gemm_bf16.c's scratch)
    int64_t speech;                    // the speech path (in activations): os_plan_speech
    int64_t total;
} os_plan;

// resident memory beyond omnishard's own buffers (code, libraries, Open MPI's shared memory, blocks under 32 MB
// that glibc keeps after they are freed), measured on Debian 12 / Open MPI 4.1 with bench/plan_vs_rss.py:
// 19 MB for a tiny model on 1-4 ranks, 19-85 MB over the allocation peak on the bench configs
#define OS_PLAN_BASELINE_BYTES (int64_t)40000000

// accum: micro-batches per optimizer step (gradient accumulation; > 1 keeps every gradient slice for the whole step)
// esz: 0 fp32; bf16 mixed precision (--torch_dtype bfloat16): the bytes of a rounded product input on the path in
// use (2 oneDNN, 4 the sgemm fallback; k_gemm_bf16_esz): the bf16 copies kept (stage 0-2) or the buckets gathered in
// bf16 (stage 3, 2 bytes per element on every path) and the rounded product inputs (os_plan_bf16) are counted
// (docs/zero.md "bf16")
void os_plan_compute(const os_model *m, int nranks, int stage, int64_t batch, int64_t seq, int recompute, int64_t accum,
                     int esz, os_plan *p);
// What loading reads for one parameter: `have` leading elements from the checkpoint (the rest initialised), `bytes`
// per checkpoint element, and `rows` = the checkpoint's rows when fewer than the parameter's (a vocabulary resize
// whose new rows mean_resizing fills), else 0.
typedef struct {
    int64_t have, rows;
    int bytes;
} os_plan_src;
// The start-up peak of one rank (loading, before the first step; session.c fills bucket after bucket): its
// parameters as far as filled, the checkpoint pages it has read (they stay resident until loading ends, then
// os_st_dir_release_pages drops them) and, while a resized parameter's new rows are filled with mean_resizing
// (model/mean_rows.c: every rank with new rows reads all checkpoint rows of the tensor), the C x C covariance in
// double and the read blocks. AdamW moments and gradient buffers are allocated zeroed and untouched until the first
// step. src[reg.np]; mean_resizing 0: --new_rows_init normal (no scratch). At stage 3 the pages are those of the
// rank reading the most (an upper bound: the rank with new rows may be another).
int64_t os_plan_startup(const os_model *m, int nranks, int stage, const os_plan_src *src, int mean_resizing);
// mean_resizing's scratch for rows of width C (bytes at os_mean_rows_init's peak)
int64_t os_plan_mean_rows_bytes(int64_t C);
// bf16: the bytes of the rounded product inputs held at the peak (the largest activation operands, kept by
// src/kernels/gemm_bf16.c; the weights are rounded ahead by the runtime), esz bytes per element; on the sgemm path
// (esz 4) also the bf16 operands widened to fp32 (kernels/matmul.c's scratch)
int64_t os_plan_bf16(const os_model *m, int64_t batch, int64_t seq, int esz);
// bf16 training: the bytes of the head's stash of rounded gradients (model/loss.h) in the activations' arena
int64_t os_plan_bf16_stash(const os_model *m, int64_t batch, int64_t seq, int esz);
// --speech_encoder of plan: a Whisper directory (its config.json) or a preset ("whisper-small", "whisper-medium",
// "whisper-large-v3"); sets oc->speech_dim (os_model_build then declares the projector) as sft does. 0 or -1 + message.
int os_plan_speech_config(const char *encoder, os_omni_config *oc, os_whisper_config *wc);
// The speech path of one rank, B samples per micro-batch (counted at the step's peak, an upper bound: the encoder
// runs before the LLM's forward): the buffers kept through the step (log-mel, encoder output, projector
// activations, output and gradient) and the frozen encoder's forward (one sample's block scratch, attention
// [H, T, T] included; at stage 3 two gathered blocks; esz > 0, bf16: a norm output's bf16 store). Its parameters
// are in the registry (no gradient, no moments).
int64_t os_plan_speech(const os_model *m, int N, int stage, int64_t B, int esz);

// One configuration of a plan row and its per-rank total (the larger of the step and start-up, plus the baseline)
typedef struct {
    int nranks, stage, recompute;
    int64_t batch, accum, total;
} os_plan_fit;
int64_t os_plan_row_total(const os_model *m, const os_plan_fit *f, int64_t L, int esz, const os_plan_src *src,
                          int mean_resizing);
// When no row of the table fits dev bytes: the nearest configuration that does, looked for in this order, the
// first found wins: (1) the same ranks and batch, any stage and recomputation (lowest stage first, then without
// recomputation first: the least communication and compute); (2) a smaller per-rank batch (halved) with the
// gradient accumulation that keeps the global batch; (3) more ranks (doubling, up to 4096), batch 1, any stage and
// recomputation, with the accumulation that keeps the global batch where it divides. 1 and *out when found, 0 when
// nothing fits even then.
int os_plan_suggest(const os_model *m, const os_plan_fit *asked, int64_t L, int esz, const os_plan_src *src,
                    int mean_resizing, int64_t dev, os_plan_fit *out);
// built-in Qwen2.5 configurations ("qwen2.5-0.5b", "-1.5b", "-3b", "-7b"); 0 or -1 if unknown
int os_plan_preset(const char *name, os_qwen2_config *c);
