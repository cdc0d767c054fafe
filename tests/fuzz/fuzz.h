// Fuzz targets for the readers of user files (tests/fuzz/README.md). Each
// fuzz_<name>.c defines LLVMFuzzerTestOneInput(data, size): it hands the bytes to one reader as a file or a
// buffer and returns 0; a reader must answer any input with a result or an error message, never a crash, an
// abort, a leak of its own error path under ASan, or an exit.
// Built two ways (Makefile): `make fuzz` links each target with clang's libFuzzer (build-fuzz/fuzz_<name>);
// `make` links it with replay.c into $(BUILD)/tests/test_fuzz_<name>, which runs every file of
// tests/fuzz/corpus/<name>/ once (seeds and every input a fuzzing run found to fail), as a unit test.
#pragma once
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// Writes data[size] to the file named suffix in this process's scratch folder ($TMPDIR or /tmp/omnishard_fuzz_<pid>,
// removed at exit) and returns its path (static storage; up to 8 names). Exits 2 when it cannot be written.
const char *fuzz_file(const uint8_t *data, size_t size, const char *suffix);

// The repository's tests/fuzz folder (the working directory's, or $OMNISHARD_FUZZ_DIR), for fixtures.
const char *fuzz_dir(void);
