// The run directory of omnishard sft (docs/operations.md, "Output directories"): one run per directory, never two
// mixed. --add_version writes into a new OUTPUT_DIR/vN-YYYYMMDD-HHMMSS; a directory that holds an earlier run's files
// is refused (naming them) unless the run resumes a checkpoint of that directory, or --overwrite_output_dir true
// removes the earlier run's files first; args.json records the run's resolved settings.
#pragma once
#include <stddef.h>

// --add_version: rank 0 creates OUTPUT_DIR/vN-YYYYMMDD-HHMMSS (N one past the highest vN-* there) and every rank
// gets its path in run_dir; without it run_dir = output_dir. Collective; a failure ends every rank.
void os_rundir_version(const char *output_dir, int add_version, char *run_dir, size_t n);
// Rank 0, with the directory locked: 0 when dir holds no run's files (logging.jsonl, args.json, checkpoint-N*,
// final_model*, images/, loss.svg; other files do not count and are left alone), or when the run resumes a
// checkpoint inside dir (resume_from's parent is dir); with overwrite, those files are removed first, each named,
// and the others kept and named. Otherwise -1 + message naming the run's files and the ways on.
int os_rundir_claim(const char *dir, const char *resume_from, int overwrite);
