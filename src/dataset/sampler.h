// Sample order defined on global indices, the same for any number of ranks: epoch e visits the samples in the
// permutation perm_e (Fisher-Yates driven by the counter RNG keyed by (seed, e)). The run reads this stream from a
// data position (epoch, pos): an optimizer step takes the next GB = ranks * accumulation * batch positions
// [pos, pos+GB), cut at the epoch's end; micro-batch k of rank r takes pos + (k*ranks + r)*batch + [0, batch).
// So N ranks x accumulation K sees exactly the samples 1 rank x accumulation N*K sees, grouped the same way. The
// last step of an epoch may be partial: micro-batches past the end are empty (they still run, with no targets,
// so collectives stay in lockstep). Checkpoints record the position, so a run resumed with another global batch
// continues with the next sample the interrupted run would have read (docs/training.md, "Resume rules").
#pragma once
#include <stdint.h>

void os_epoch_perm(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch);

typedef struct {
    int64_t epoch, pos;   // the next sample is perm_epoch[pos], 0 <= pos < n
} os_data_pos;
// samples the step at p takes: min(GB, n - pos)
int64_t os_data_take(const os_data_pos *p, int64_t n, int64_t GB);
// move past one step's samples (to the next epoch's start at the end)
void os_data_advance(os_data_pos *p, int64_t n, int64_t GB);
// optimizer steps of GB samples from a until b is reached (0 when b is not after a)
int64_t os_data_steps(os_data_pos a, os_data_pos b, int64_t n, int64_t GB);
// where `epochs` (may be fractional) epochs of n samples end: (floor(epochs), ceil(frac * n))
os_data_pos os_data_end(double epochs, int64_t n);

// The split of a step among ranks. Global micro-batch g = k * ranks + rank (micro-batch k of rank `rank`) of the
// step at stream position `pos` takes positions [*first, *first + count): *first = pos + g * batch, count =
// min(batch, n - *first), 0 past the epoch's end (an empty micro-batch).
int64_t os_data_micro(int64_t pos, int64_t g, int64_t batch, int64_t n, int64_t *first);
// how many of the global micro-batches g < count of the step at pos hold at least one sample
int64_t os_data_filled(int64_t pos, int64_t count, int64_t batch, int64_t n);
