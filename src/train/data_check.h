// The start-up data check (docs/dataset.md "The start-up data check"): before the model loads, every sample of the
// training data is built once (tokenized: rank r builds samples r, r + N, ...; the ids stay cached as on any first
// use) and counted: skipped (no answer position fits --max_length under --truncation_strategy) or cut. Rank 0 prints
// the counts when any; when no sample can train, every rank stops here with the smallest --max_length that would
// train one.
#pragma once
#include "dataset/dataset.h"

// collective; what names the data in messages ("training"); returns only when some sample trains
void os_data_check(os_dataset *d, const char *what, int64_t max_length, const char *truncation);
