// What this binary is: omnishard's version and the git commit it was built from, both baked in at build time by
// the Makefile (a generated version.h; `omnishard --version`, args.json).
#pragma once

const char *os_version(void);      // "0.1.0"
// the commit's hash (12 hex digits), with " (modified)" when the checkout had uncommitted changes to tracked files;
// "none (built outside a git checkout)" when the sources were not a git checkout
const char *os_git_commit(void);
