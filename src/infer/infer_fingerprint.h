// Content fingerprints of what an infer output was made from (the model, the speech encoder, the dataset), kept in
// the output's settings file so that --resume true can tell whether it continues the same run (infer_output.h).
#pragma once
#include <stdint.h>

// A 64-bit fingerprint of the file or directory at path (docs/inference.md "Resume"): of a directory, its regular
// files (recursively, hidden names skipped, in name order), each by its relative name, size and content; a file of
// up to 8 MiB whole, a larger one by its size, first and last MiB and 64 evenly spaced 16 KiB pieces (so that a
// 15 GB model costs about 3 MiB of reads per file). model: a model's directory, whose data-like files (*.jsonl,
// *.log, *.md, *.png, *.svg, *.wav, an infer output's *.run.json) are not part of it and are skipped. 0, or -1 +
// message naming the path.
int os_fingerprint(const char *path, int model, uint64_t *h);
