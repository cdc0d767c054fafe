// Option parsing shared by sub-commands with plain "--name VALUE" / "--flag" options (mel, mel --encoder, tokenize).
#pragma once

typedef enum { OS_OPT_STR, OS_OPT_INT, OS_OPT_FLAG } os_opt_kind;

// One option: `name` ("--wav"); dst points to a const char * (STR, the argv string), an int (INT, atoi of the
// value) or an int set to 1 (FLAG, takes no value).
typedef struct {
    const char *name;
    os_opt_kind kind;
    void *dst;
} os_opt;

// Parses argv[1..argc) in order against opts[0..n). Returns -1 when all were options (go on); 0 after --help/-h
// (usage printed on stdout); 2 after an unknown option or one without its value ("omnishard ARGV0: unknown or
// incomplete option '...'" and the usage on stderr). Exit statuses as the sub-commands return them.
int os_cli_parse(int argc, char **argv, const os_opt *opts, int n, const char *usage);
