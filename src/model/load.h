// Filling parameter buffers from a checkpoint, or initialising what it lacks.
#pragma once
#include "io/safetensors.h"
#include "model/registry.h"
#include <stdint.h>

// Check every registered parameter against the checkpoint (present with the right shape, or allowed to be
// initialised; resizable ones may have fewer rows). Error names the tensor, file and shapes.
int os_params_check(const os_registry *r, const os_st_dir *d, const char *dir);
// Fill elements [lo, hi) of bucket b's flat buffer into dst[hi - lo]: from the checkpoint where it has the
// values, else by the parameter's init rule from the counter-based RNG keyed by (seed, name, element index),
// so that any slicing gives the same values. Elements past the bucket's numel (padding) become 0.
int os_params_fill(const os_registry *r, const os_st_dir *d, int b, int64_t lo, int64_t hi, float *dst,
                   uint64_t seed);

// A checkpoint whose tensor names differ from the registry's in their leading part: parameter "<from>REST" is
// read as "<to>REST" (e.g. from "encoder." to "model.encoder."). NULL map: names as registered.
typedef struct {
    const char *from, *to;
} os_name_map;
// os_params_check over buckets [b0, b1) only, with names mapped
int os_params_check_map(const os_registry *r, const os_st_dir *d, const char *dir, int b0, int b1,
                        const os_name_map *map);
// os_params_fill with names mapped
int os_params_fill_map(const os_registry *r, const os_st_dir *d, const os_name_map *map, int b, int64_t lo,
                       int64_t hi, float *dst, uint64_t seed);
