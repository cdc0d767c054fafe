// Where the model and the sharding runtime meet (neither includes the other: README "Layout", docs/zero.md).
// The model declares its parameters (model/params.h); the runtime lays them out in buckets and owns the data
// (zero/registry.h, zero/runtime.h); a forward reads them through os_weights (model/weights.h).
#pragma once
#include "io/safetensors.h"
#include "model/load.h"
#include "model/params.h"
#include "model/weights.h"
#include "zero/runtime.h"

// the runtime's registry for the model's declarations (same parameter and bucket ids)
void os_runtime_registry(const os_registry *decl, zr_registry *out);
// zr_init over the declarations' registry
void os_runtime_init(zr_runtime *rt, const os_registry *decl, int stage, int rank, int nranks);
// Initial values of this rank's part of bucket b: from checkpoint d (names mapped by map, may be NULL), else by
// each parameter's init rule (os_params_fill). 0, or -1 + message.
int os_runtime_fill(zr_runtime *rt, const os_registry *decl, int b, const os_st_dir *d, const os_name_map *map,
                    uint64_t seed);
// the runtime's parameters as a model forward reads them: zr_prefetch / zr_gather / zr_release / zr_param
os_weights os_runtime_weights(zr_runtime *rt);
