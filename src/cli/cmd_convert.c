// omnishard convert: runs tools/convert_parquet.py (Python, on pyarrow: Parquet has no C library among our
// dependencies) with the arguments given. The tool is found under $OMNISHARD_HOME/tools, else next to the build
// folder that holds this binary (<source tree>/build*/omnishard -> <source tree>/tools/), else where `make install`
// put it (PREFIX/bin/omnishard -> PREFIX/share/omnishard/tools/); the interpreter is $OMNISHARD_PYTHON, else
// <that folder>/.venv/bin/python (made by tools/setup.sh in a source tree), else python3 on the PATH.
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

// the folder holding TOOL: $OMNISHARD_HOME, else the source tree above this executable's build folder, else the
// installed share/omnishard beside its bin/; tried lists the folders looked in (for the message)
static int tool_root(char *dir, size_t n, char *tried, size_t tn) {
    const char *home = os_knobs()->home;
    if (home) return snprintf(dir, n, "%s", home) < (int)n ? 0 : -1;
    char exe[PATH_MAX], tool[PATH_MAX + 64];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return -1;
    exe[len] = 0;
    for (int up = 0; up < 2; up++) {   // drop "/omnishard", then "/build" (or "/bin")
        char *slash = strrchr(exe, '/');
        if (!slash) return -1;
        *slash = 0;
    }
    const char *cand[] = {"", "/share/omnishard"};
    tried[0] = 0;
    for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
        snprintf(dir, n, "%s%s", exe, cand[i]);
        snprintf(tool, sizeof tool, "%s/%s", dir, TOOL);
        if (access(tool, R_OK) == 0) return 0;
        size_t k = strlen(tried);
        snprintf(tried + k, tn - k, "%s%s", k ? ", " : "", tool);
    }
    return -1;
}

int cmd_convert(int argc, char **argv) {
    char root[PATH_MAX], tool[PATH_MAX + 32], venv[PATH_MAX + 32], tried[3 * PATH_MAX] = "";
    if (tool_root(root, sizeof root, tried, sizeof tried) < 0)
        os_die("convert: %s not found (looked for %s): set OMNISHARD_HOME to the source tree or to "
               "PREFIX/share/omnishard", TOOL, tried[0] ? tried : "the folder of this executable");
    snprintf(tool, sizeof tool, "%s/%s", root, TOOL);
    if (access(tool, R_OK) != 0)
        os_die("convert: %s: not found (OMNISHARD_HOME is %s: the source tree or PREFIX/share/omnishard)", tool, root);
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
