// A main() for a fuzz target without libFuzzer (fuzz.h): runs LLVMFuzzerTestOneInput once on every file named
// on the command line (a folder: each file in it, in name order), or, with no arguments, on every file of
// tests/fuzz/corpus/<name>/ for the binary test_fuzz_<name> (run from the repository root, as the tests are).
// Prints one line per folder; exits 0 when every input returned (a crash stops it, as under libFuzzer).
#include "core/alloc.h"
#include "core/err.h"
#include "fuzz.h"
#include "io/atomic.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// the input in a block of exactly its size, as libFuzzer hands it over (a read past its end is then caught)
static int run_file(const char *path) {
    size_t n;
    char *text = os_read_file(path, &n);
    if (!text) return fprintf(stderr, "replay: %s\n", os_errmsg()), -1;
    uint8_t *buf = malloc(n ? n : 1);
    memcpy(buf, text, n);
    os_free(text);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static int run_path(const char *path) {
    struct stat st;
    if (stat(path, &st)) return fprintf(stderr, "replay: %s: no such file or folder\n", path), -1;
    if (!S_ISDIR(st.st_mode)) return run_file(path);
    struct dirent **e;
    int n = scandir(path, &e, NULL, by_name), runs = 0, bad = 0;
    if (n < 0) return fprintf(stderr, "replay: cannot list %s\n", path), -1;
    for (int i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e[i]->d_name);
        if (e[i]->d_name[0] != '.' && !stat(p, &st) && S_ISREG(st.st_mode)) bad |= run_file(p), runs++;
        free(e[i]);
    }
    free(e);
    printf("replay: %d inputs of %s\n", runs, path);
    return runs ? bad : (fprintf(stderr, "replay: %s holds no inputs\n", path), -1);
}

int main(int argc, char **argv) {
    int bad = 0;
    for (int i = 1; i < argc; i++) bad |= run_path(argv[i]);
    if (argc > 1) return bad ? 1 : 0;
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    const char *name = strncmp(base, "test_fuzz_", 10) ? base : base + 10;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/corpus/%s", fuzz_dir(), name);
    return run_path(dir) ? 1 : 0;
}
