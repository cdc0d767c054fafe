// Command-line options from a table, for every omnishard command (docs/operations.md "Options"): each option has
// a type, a range or its allowed values and a help line; the table gives the parsing, the checks, --help and the
// canonical text of each value (the start-up agreement, args.json).
// Spellings (as Hugging Face's parser): --name value, --name=value, and '-' for '_' in the name (--learning-rate);
// a boolean given bare (followed by another --option or nothing) means true. An alias "--other" is another name
// of the option, spelt the same ways. Every unknown option is reported at
// once, each with the nearest known name.
#pragma once
#include <stddef.h>
#include <stdio.h>

typedef enum {
    OS_OPT_STR,      // const char *: the argv string
    OS_OPT_CHOICE,   // const char *: one of choices "a|b|c" (the first is the default, set by os_opts_defaults)
    OS_OPT_F64,      // double within range
    OS_OPT_I64,      // int64_t within range
    OS_OPT_INT,      // int within range
    OS_OPT_BOOL,     // int 0/1: true|True|1|false|False|0, or bare (true)
    OS_OPT_FLAG,     // int set to 1; never takes a value
    OS_OPT_STAGE,    // int ZeRO stage from zero0 | zero1 | zero2 | zero3 (--deepspeed)
    OS_OPT_CUSTOM,   // parse(obj, value) and show(obj, buf, n) do it
} os_opt_type;

typedef struct os_opt {
    const char *name;   // without "--"
    os_opt_type type;
    size_t off;         // where the value goes in the struct the table fills
    const char *help;
    const char *range;     // F64/I64/INT: "[lo,hi]", "(lo,hi)", "[lo,inf)" ... (required for them)
    const char *choices;   // CHOICE: "a|b|c"
    int per_rank;          // may differ between ranks: left out of the start-up agreement
    const char *alias;     // another spelling: "-o" matched as written; "--name" as a name (--name=value, '-' for '_')
    const char *unset;     // a value that means "not given" (HF's max_steps -1): accepted, the default stays
    const char *metavar;   // the value's name in --help (default by type: TEXT, N, X, BOOL ...)
    const char *section;   // the section of the struct the option belongs to (os_opt_group.sections), or NULL
    int (*parse)(void *obj, const char *value);            // CUSTOM: 0, or -1 with the message stored
    void (*show)(const void *obj, char *buf, size_t n);   // CUSTOM: canonical text
    int list;   // CUSTOM: takes the words after it up to the next --option (--dataset A B): parse(obj, NULL) at each
                // occurrence (a repeat replaces the earlier list), then parse(obj, word) per word
} os_opt;

// A section of a table's struct (sft's model, data, training, ...): --help lists its options under its heading.
typedef struct {
    const char *name;    // as os_opt.section names it ("model")
    const char *title;   // what it holds, after the name in --help
} os_opt_section;

// One table and the struct it fills. A command may parse several groups at once (plan: its own options, then the
// training options); the first group naming an option takes it.
typedef struct {
    const char *title;   // heading in --help ("options")
    const os_opt *opts;
    int n;
    void *obj;
    const os_opt_section *sections;   // NULL, or the table's sections in the order --help lists them
    int nsections;
} os_opt_group;

// An option another tool has (ms-swift's) that the command does not: refused with the reason (what to do instead),
// or, when it changes nothing here, accepted with any value (the caller prints the reason as a note)
typedef struct {
    const char *name;     // without "--"
    const char *reason;   // why, and what to do
    int no_effect;        // 1: accepted, noted in known_given
} os_opt_known;

typedef struct {
    const char *command;   // "sft": messages say "omnishard sft --help"
    const char *usage;     // printed before the options (ends with a newline)
    const os_opt_group *groups;
    int ngroups;
    const char *positional;   // name of the one bare argument allowed ("LOGGING_JSONL"), or NULL for none
    const char **pos;         // where it goes
    const char *notes;        // printed after the options, or NULL
    unsigned char *const *given;   // NULL, or per group NULL or its n flags: given[g][i] set to 1 when the group's
                                   // option i is on the command line (any spelling, its default value included)
    const os_opt_known *known;   // NULL, or nknown names that are not options: refused with their reason, or
    int nknown;                  // (no_effect) accepted with their value, known_given[i] set to 1
    unsigned char *known_given;
} os_opt_cmd;

// Parses argv[1..argc) (argv[0] is the command). Returns 0; 1 when --help or -h was given (nothing printed); -1
// with the message stored: every unknown option ("unknown option '--x' (nearest: --y)"; a known one of another tool:
// "unknown option '--x' (ms-swift's; not in omnishard): REASON"), a value outside its range
// or its allowed values, a missing value.
int os_opts_parse(const os_opt_cmd *c, int argc, char **argv);
// a note (os_info) for each no-effect known option given[i] flags: "omnishard COMMAND: --x accepted, no effect here: WHY"
void os_opts_known_notes(const os_opt_known *known, int n, const unsigned char *given, const char *command);
// --help: the usage, each group's options with help, range or allowed values (a group with sections: under each
// section's heading, in the sections' order, each section's options in the table's order; an option of no listed
// section last, under "other"), then the notes
void os_opts_usage(const os_opt_cmd *c, FILE *f);
// each CHOICE option of the table set to its first choice (the rest of obj as the caller set it)
void os_opts_defaults(const os_opt *opts, int n, void *obj);
// the value of o in obj as canonical text (the same value spelt differently gives the same text)
void os_opts_value(const os_opt *o, const void *obj, char *buf, size_t n);
// a choice's canonical spelling: float32 for fp32, bfloat16 for bf16, true/false for True/False; else v itself
const char *os_opts_canonical_choice(const char *v);
// the table's option nearest to `name` (edit distance, '-' and '_' alike), or NULL when none is within max(2, len/3)
const os_opt *os_opts_nearest(const os_opt_cmd *c, const char *name, size_t len);
