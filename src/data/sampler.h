// Sample order defined on global indices, the same for any number of ranks: epoch e visits the samples in the
// permutation perm_e (Fisher-Yates driven by the counter RNG keyed by (seed, e)). Optimizer step s of an
// epoch covers global positions [s*GB, (s+1)*GB), GB = ranks * accumulation * batch; micro-batch k of rank r
// takes positions s*GB + (k*ranks + r)*batch + [0, batch). So N ranks x accumulation K sees exactly the
// samples 1 rank x accumulation N*K sees, grouped the same way. The last step of an epoch may be partial:
// micro-batches past the end are empty (they still run, with no targets, so collectives stay in lockstep).
#pragma once
#include <stdint.h>

void os_epoch_perm(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch);
