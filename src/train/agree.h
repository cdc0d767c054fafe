// Start-up agreement (docs/training.md "Start-up agreement"): before any collective whose schedule depends on
// the options or the data, the ranks exchange what they were given so that a rank launched differently stops the
// job with a message, on every rank, instead of a hang or a silently different run. Collective.
#pragma once
#include "train/args.h"
#include <stdint.h>

// Each rank's parse status (rc: 0 ok, 1 --help, -1 failed with the stored message). Returns 0 when every rank
// parsed its options, 1 when every rank was given --help, else -1 with "rank R: <R's message>" for each failed
// rank stored on every rank.
int os_agree_parse(int rc);
// Every option of the table except the per-rank ones (os_sft_args_value): 0 when all ranks have the same values,
// else -1 with "ranks disagree on --NAME: rank 0 has 'A', rank R has 'B'" for each differing option.
int os_agree_options(const os_sft_args *a);
// The same for any option table: nx (name, value) pairs first, then every option of opts[n] in obj except the
// per-rank ones, by canonical value (os_opts_value).
int os_agree_table(const os_opt *opts, int n, const void *obj, const char *const *xnames, const char *const *xvalues,
                   int nx);
// The same for n (name, value) pairs, e.g. file digests; what names them in the message ("dataset file").
int os_agree_values(const char *const *names, const char *const *values, int n);
// Every rank learns whether any failed (rc < 0 on that rank): 0 when none did, else -1 on every rank; a rank
// that did not fail itself stores "stopping: N other rank(s) reported an error" (an echo: os_stop_if_failed then
// reports the message of a rank that failed).
int os_agree_ok(int rc);
// "BYTES bytes, digest HEX" of a whole file (hashed while read), or "missing"
void os_file_digest_text(const char *path, char *out, size_t n);
void os_digest_text(int64_t bytes, uint64_t digest, char *out, size_t n);
