// omnishard convert: runs tools/convert_parquet.py (Python, on pyarrow: Parquet has no C library among our
// dependencies) with the arguments given. The tool is found next to the build folder that holds this binary
// (<source tree>/build*/omnishard -> <source tree>/tools/), or under $OMNISHARD_HOME/tools; the interpreter is
// $OMNISHARD_PYTHON, else <source tree>/.venv/bin/python (made by tools/setup.sh), else python3 on the PATH.
#include "cli/commands.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/knobs.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOOL "tools/convert_parquet.py"

// the source tree: $OMNISHARD_HOME, else the folder above the one holding this executable
static int source_tree(char *dir, size_t n) {
    const char *home = os_knobs()->home;
    if (home) return snprintf(dir, n, "%s", home) < (int)n ? 0 : -1;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return -1;
    exe[len] = 0;
    for (int up = 0; up < 2; up++) {   // drop "/omnishard", then "/build"
        char *slash = strrchr(exe, '/');
        if (!slash) return -1;
        *slash = 0;
    }
    return snprintf(dir, n, "%s", exe[0] ? exe : "/") < (int)n ? 0 : -1;
}

int cmd_convert(int argc, char **argv) {
    char root[PATH_MAX], tool[PATH_MAX + 32], venv[PATH_MAX + 32];
    if (source_tree(root, sizeof root) < 0) os_die("convert: cannot find the omnishard source tree (set OMNISHARD_HOME)");
    snprintf(tool, sizeof tool, "%s/%s", root, TOOL);
    if (access(tool, R_OK) != 0)
        os_die("convert: %s: not found (the converter is part of the source tree; set OMNISHARD_HOME to it)", tool);
    snprintf(venv, sizeof venv, "%s/.venv/bin/python", root);
    const char *py = os_knobs()->python;
    if (!py) py = access(venv, X_OK) == 0 ? venv : "python3";
    char **args = os_alloc(((size_t)argc + 2) * sizeof *args, "convert arguments");
    args[0] = (char *)py;
    args[1] = tool;
    for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
    args[argc + 1] = NULL;
    fflush(NULL);
    execvp(py, args);
    os_die("convert: cannot run the Python interpreter '%s' for %s: %s (set OMNISHARD_PYTHON, or run tools/setup.sh)",
           py, tool, strerror(errno));
}
