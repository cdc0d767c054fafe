// Several dataset files as one (ms-swift's `--dataset A B#N ...`, docs/dataset.md "Mixing datasets"): each source
// file read whole or sampled to N samples (PATH#N), the sources concatenated and, with shuffle, put in one seeded
// order. The same on every rank (counter RNG keyed by the seed). Errors of a sample name its own file and line.
#pragma once
#include "dataset/dataset.h"

#define OS_MAX_SOURCES 16
// host memory a mixed dataset takes per sample: its source (4 bytes) and index (8), the run's order of samples (8),
// and while a shuffled mix is built, its permutation and the shuffled copies (20)
#define OS_MIX_BYTES_PER_SAMPLE(shuffle) ((shuffle) ? 40 : 20)

// "PATH#N" -> *path (a copy of PATH, os_free it) and *sample = N >= 1; a plain PATH (or one whose text after its
// last '#' is not a number): itself and *sample = -1 (every sample once). -1 + message for #0 or a number too large.
int os_data_source_parse(const char *spec, char **path, int64_t *sample);

// The sample list of one source of n samples taken `sample` times (ms-swift's sample_dataset): floor(sample / n)
// copies of 0..n-1 in order, then the first (sample mod n) of a permutation keyed by seed (shuffle) or 0.. (not).
// idx[sample]; sample < 0: 0..n-1.
void os_data_source_pick(int64_t *idx, int64_t n, int64_t sample, int shuffle, uint64_t seed);

// Open specs[0..n) (each "PATH" or "PATH#N", PATH a file or a folder omnishard convert wrote) as one dataset. One
// plain PATH is that dataset itself (nothing mixed). Otherwise: the sources' samples in order (source 0's pick, then
// source 1's, ...), put in one permutation keyed by seed when shuffle. role keys the streams ("train", "val") so
// the same spec in both draws differently. digest/bytes cover every file, the counts, shuffle and seed.
os_dataset *os_dataset_open_list(const char *const *specs, int n, const os_data_sizes *z, const char *model_dir,
                                 int64_t max_length, const char *truncation, int shuffle, uint64_t seed, const char *role);

// The files behind d: a mixed dataset's sources, else d itself. Returns their count (<= OS_MAX_SOURCES).
int os_dataset_sources(os_dataset *d, os_dataset **src);
