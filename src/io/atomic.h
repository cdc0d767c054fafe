// Files that are never half-written: temp file + fsync + rename + directory fsync; directory helpers.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// Write n bytes to path via path.tmp.<pid>; 0 or -1 + message naming path and errno text.
int os_write_file_atomic(const char *path, const void *data, size_t n);
// mkdir -p (mode 0777 & umask); existing directories are fine; -1 if a component is not a directory.
int os_mkdir_p(const char *path);
// Whole file, NUL-terminated (os_free it); *n (may be NULL) = size without the NUL. NULL + message on error
// (a directory is refused: "PATH: is a directory, expected a file").
char *os_read_file(const char *path, size_t *n);
// fopen(path, "rb") for every reader that streams a file: a directory (which fopen opens, and whose size reads as
// 2^63-1) or a missing/unreadable path gives NULL + a message naming path and what was expected ("the dataset").
FILE *os_fopen_read(const char *path, const char *what);
// size and FNV-1a 64 checksum (core/rng.h's os_fnv1a from OS_FNV_BASIS) of a whole file; 0 or -1 + message naming it
int os_file_checksum(const char *path, int64_t *bytes, uint64_t *sum);
// Make tmpdir appear as finaldir: an existing finaldir is renamed to finaldir.old.<pid>, tmpdir renamed in,
// the parent fsynced, then the old one removed recursively.
int os_rename_dir_atomic(const char *tmpdir, const char *finaldir);
// rm -rf (does not follow symlinks); a missing path is fine.
int os_rm_rf(const char *path);
// path as an absolute path in out[n]: as it is when it starts with '/', else base/path (base NULL: the current
// directory; a relative base is taken from the current directory too); no symlink is resolved, the path need not
// exist. 0, or -1 + message when the result does not fit or the current directory is unknown.
int os_path_absolute(const char *path, const char *base, char *out, size_t n);
// fsync the directory that contains path (used after a rename).
int os_fsync_parent(const char *path);
