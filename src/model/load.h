// Filling parameter buffers from a checkpoint, or initialising what it lacks.
#pragma once
#include "io/safetensors.h"
#include "model/params.h"
#include <stdint.h>

// Check every registered parameter against the checkpoint (present with the right shape, or allowed to be
// initialised; resizable ones may have fewer rows). Error names the tensor, file and shapes.
int os_params_check(const os_registry *r, const os_st_dir *d, const char *dir);
// A checkpoint whose tensor names differ from the registry's in their leading part: parameter "<from>REST" is
// read as "<to>REST" (e.g. from "encoder." to "model.encoder."). NULL map: names as registered.
typedef struct {
    const char *from, *to;
} os_name_map;
// os_params_check over buckets [b0, b1) only, with names mapped
int os_params_check_map(const os_registry *r, const os_st_dir *d, const char *dir, int b0, int b1,
                        const os_name_map *map);
// Fill elements [s, s+n) (row-major) of parameter i into dst[n]: from the checkpoint (names mapped by map, may be
// NULL) where it has the values, else by the parameter's init rule from the counter-based RNG keyed by (seed,
// name, element index), so that any slicing gives the same values.
int os_params_fill(const os_registry *r, const os_st_dir *d, const os_name_map *map, int i, int64_t s, int64_t n,
                   float *dst, uint64_t seed);
