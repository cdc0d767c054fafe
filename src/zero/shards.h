// This rank's shards on disk: the rank file of a checkpoint (persist/checkpoint.h keeps the directory, manifest,
// checksums and atomic rename around it). Rank r's file holds, for each bucket b < nb, its range
// [r*S_b, min((r+1)*S_b, numel_b)) as F32 tensors "param/<bucket>" and (with_optim, trainable buckets only)
// "exp_avg/<bucket>", "exp_avg_sq/<bucket>"; moments a rank does not hold (outside the trained range) are zeros.
// The layout is the same at every stage, so a file written at one stage and N ranks loads at any other.
#pragma once
#include "io/safetensors.h"
#include "zero/runtime.h"

// Write this rank's file (atomic: path appears complete or not at all). meta_kv as os_st_writer_begin.
int zr_shards_write(const zr_runtime *rt, int nb, const char *path, int with_optim, const char *const *meta_kv);

// Where a checkpoint's rank files come from: world files, bucket b cut in slices of slice[b] values; open(ctx, r)
// returns rank r's file (opened and verified by the caller, who also closes it) or NULL + message. what names
// the checkpoint in messages.
typedef struct {
    int world;
    const int64_t *slice;
    os_st_file *(*open)(void *ctx, int r);
    void *ctx;
    const char *what;
} zr_shard_source;
// Fill this rank's parts (zr_local) of buckets [0, nb): parameters, and the AdamW moments of trainable buckets when
// optim; each value must be finite. 0, or -1 + message naming the file, tensor and parameter.
int zr_shards_read(zr_runtime *rt, int nb, const zr_shard_source *src, int optim);
