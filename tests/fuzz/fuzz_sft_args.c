// Fuzz target: `omnishard sft` options (src/train/args.c). The bytes are split at newlines into argv (at most 64
// arguments); options that parse are then printed as the canonical texts the ranks compare at start-up.
#include "core/err.h"
#include "fuzz.h"
#include "train/args.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ARGS = 64, TEXT = 4096 };

// the canonical texts of a's options, one string of "name=value\n" lines, into out[n]
static void canonical(const os_sft_args *a, char *out, size_t n) {
    size_t at = 0;
    char buf[TEXT];
    for (int i = 0; i < os_sft_args_count() && at < n; i++) {
        const char *name;
        os_sft_args_value(a, i, &name, buf, sizeof buf);
        at += (size_t)snprintf(out + at, n - at, "%s=%s\n", name, buf);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char text[1 << 16], once[1 << 16];
    if (size >= sizeof text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char *argv[MAX_ARGS + 1] = {"sft"};
    int argc = 1;
    for (char *p = text, *nl; p && argc < MAX_ARGS; p = nl ? nl + 1 : NULL) {
        if ((nl = strchr(p, '\n'))) *nl = 0;
        argv[argc++] = p;
    }
    os_sft_args a;
    if (os_sft_args_parse(&a, argc, argv) != 0) return 0;
    canonical(&a, once, sizeof once);
    return 0;
}
