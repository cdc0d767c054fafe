// Packing (--packing true, docs/dataset.md "Packing"): a dataset view whose samples are rows of several samples of
// another dataset, back to back, up to max_length positions each. The rows are formed once, at open, greedily in
// the dataset's order (a sample that does not fit in the current row starts the next one), so the number of rows,
// the epochs and the steps are fixed before training, and the same on every rank.
// A packed row (os_sample): R rows of L = the members' summed lengths, lead 0 (collation right-pads it), seg[L] the
// member's ordinal in the row, labels as the member's except its first position's (-100 in every row: the head's
// targets are shifted by one inside a row, and no target crosses from one member into the next; a sample's first
// label is never a target anyway). The model attends inside a segment only and restarts the positions at each
// segment (dataset/batch.h: os_batch seg, pos).
// Spoken members: the row's speech mask is theirs, and wavs lists their speech inputs in order (os_sample.wavs);
// the speech front end (session/speech.h) gives the row one input slot per spoken member.
#pragma once
#include "dataset/dataset.h"

// The view over src (which it owns from then on: freed with it, also on failure). Every sample of src is read once
// here (SLAM-Omni text is tokenized now). NULL + message when a sample cannot be read.
os_dataset *os_pack_open(os_dataset *src, int64_t max_length);
// The dataset a packing view draws from; NULL when d is not one.
os_dataset *os_pack_inner(os_dataset *d);
