// Table-driven "--name VALUE" / "--flag" parsing for sub-commands (see cli_options.h).
#include "cli/cli_options.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int os_cli_parse(int argc, char **argv, const os_opt *opts, int n, const char *usage) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        int k = 0;
        while (k < n && (strcmp(a, opts[k].name) || (opts[k].kind != OS_OPT_FLAG && i + 1 >= argc))) k++;
        if (k == n) {
            fprintf(stderr, "omnishard %s: unknown or incomplete option '%s'\n%s", argv[0], a, usage);
            return 2;
        }
        if (opts[k].kind == OS_OPT_FLAG) *(int *)opts[k].dst = 1;
        else if (opts[k].kind == OS_OPT_INT) *(int *)opts[k].dst = atoi(argv[++i]);
        else *(const char **)opts[k].dst = argv[++i];
    }
    return -1;
}
