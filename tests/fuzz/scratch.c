// Scratch files and fixture paths for the fuzz targets (fuzz.h). The files live in one folder per process,
// $TMPDIR/omnishard_fuzz_<pid>/ (or /tmp/...), removed with its files at exit.
#include "fuzz.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SLOTS = 8 };
static char dir[512], names[SLOTS][64], paths[SLOTS][600];

static void remove_all(void) {
    for (int i = 0; i < SLOTS && names[i][0]; i++) unlink(paths[i]);
    rmdir(dir);
}

const char *fuzz_file(const uint8_t *data, size_t size, const char *suffix) {
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/omnishard_fuzz_%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
        if (mkdir(dir, 0700) && access(dir, W_OK)) fprintf(stderr, "fuzz: cannot make %s\n", dir), exit(2);
        atexit(remove_all);
    }
    int slot = 0;
    while (slot < SLOTS - 1 && names[slot][0] && strcmp(names[slot], suffix)) slot++;
    snprintf(names[slot], sizeof names[slot], "%s", suffix);
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", dir, suffix);
    FILE *f = fopen(paths[slot], "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) fprintf(stderr, "fuzz: cannot write %s\n", paths[slot]), exit(2);
    return paths[slot];
}

const char *fuzz_dir(void) {
    const char *d = getenv("OMNISHARD_FUZZ_DIR");
    return d && *d ? d : "tests/fuzz";
}
