// The run directory of omnishard sft (docs/operations.md, "Output directories"): one run per directory, never two
// mixed. --add_version writes into a new OUTPUT_DIR/vN-YYYYMMDD-HHMMSS; a directory that holds an earlier run's files
// is refused (naming them) unless the run resumes a checkpoint of that directory, or --overwrite_output_dir true
// removes the earlier run's files first; args.json records the run's resolved settings.
#pragma once
#include <stddef.h>

// --add_version: rank 0 creates OUTPUT_DIR/vN-YYYYMMDD-HHMMSS (N one past the highest vN-* there) and every rank
// gets its path in run_dir; without it run_dir = output_dir. Collective; a failure ends every rank.
void os_rundir_version(const char *output_dir, int add_version, char *run_dir, size_t n);
// Rank 0, with the directory locked; opens the run's manifest (io/runfiles.h) for the run to record what it writes.
// An entry of dir is the earlier run's when dir's omnishard-files.json proves it (written by omnishard, unchanged
// since); an entry it cannot prove whose name this run may write (logging.jsonl, args.json, checkpoint-N*,
// final_model*, omnishard-files.json, runs/ when tb) is in the way: refused, naming each with the reason, nothing
// touched (with or without overwrite); other entries are left alone. Then: a run resuming a checkpoint inside dir
// continues the record (a directory with no manifest, of an older omnishard, is continued as it is); an earlier
// run without overwrite is refused naming its files and the ways on; with overwrite they are removed (and its event
// files outside dir), each named, the others kept and named, and a new record begins. 0, or -1 + message.
int os_rundir_claim(const char *dir, const char *resume_from, int overwrite, int tb);
