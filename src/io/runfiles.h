// What a command wrote into its directory: DIR/omnishard-files.json (docs/operations.md "What each command may
// delete or truncate"), so that it later deletes only what it can prove it wrote itself.
//   {"format": "omnishard-files-1", "command": "sft",
//    "files": [{"path", "bytes", "mtime_ns", "fnv1a64" (files up to OS_RUNFILES_SUM_MAX bytes; null above),
//               "append" (true: a log still appended to; bytes and fnv1a64 are of the prefix recorded)}],
//    "dirs": [the directories it created], "pending": [temporaries about to be created (checkpoint-N.tmp)]}
// Paths are relative to DIR; a file outside it (--logging_dir's event files) is recorded by its absolute path.
// Proof that an entry is still what omnishard wrote:
//   a file: its recorded size, and its recorded checksum (above OS_RUNFILES_SUM_MAX: its modification time);
//   an appended file: at least its recorded size, and the recorded prefix's checksum;
//   a directory: recorded, and everything in it (recursively) recorded and proven; a pending temporary: listed.
// One process keeps a directory's manifest (rank 0, under the directory's lock); every change is written at once,
// atomically. Every call but os_runfiles_open is a no-op (returning 0) while no manifest is open.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define OS_RUNFILES "omnishard-files.json"
#define OS_RUNFILES_SUM_MAX ((long long)256 << 20)

// Read DIR's manifest as the earlier run left it: 1 found, 0 none (an empty record is kept: a foreign directory),
// -1 + message when it exists but cannot be read (the record is then empty too). Opens the manifest for the calls
// below; command names the writer in a new manifest.
int os_runfiles_open(const char *dir, const char *command);
// 1 when the entry (path relative to DIR, or absolute) is proven omnishard's (or does not exist); 0 and why (a
// short reason: "not listed in omnishard-files.json", "size 12, recorded 40", ...) otherwise
int os_runfiles_proven(const char *path, char *why, size_t n);
// the absolute paths of the recorded files outside DIR (event files of --logging_dir), one at a time: i from 0;
// NULL past the last
const char *os_runfiles_external(int i);
// remove a proven entry (re-checked first) and forget it; 0, or -1 + message (nothing removed when not proven)
int os_runfiles_remove(const char *path);
// a new run: forget every record (after an overwrite removed the earlier run's files) and write the manifest
int os_runfiles_reset(void);
// record the file or directory at path (DIR/..., or absolute), replacing an earlier record of it and of anything
// under it; 0 or -1 + message
int os_runfiles_record(const char *path);
// record a file still being appended to by the size and FNV-1a 64 of what its writer wrote so far (no reading)
int os_runfiles_record_appended(const char *path, long long bytes, uint64_t sum);
// record the directory at path itself, not what it holds (a folder this run created that others may write into too)
int os_runfiles_record_dir(const char *path);
// record path as it is, written by an earlier run (a start-up failure of this one leaves it)
int os_runfiles_adopt(const char *path);
// a temporary about to be created at path (proof enough to remove it at the next start, if a kill leaves it)
int os_runfiles_pending(const char *path);
// forget path (removed by its writer: a temporary renamed, a checkpoint past --save_total_limit)
int os_runfiles_forget(const char *path);
// 0 when path does not exist or is proven omnishard's, so its writer may replace it; -1 + message naming it otherwise
int os_runfiles_may_replace(const char *path);
// a start-up that failed: remove what this process created and recorded (the manifest too when it created it)
void os_runfiles_undo(void);
