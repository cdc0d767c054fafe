// Command-line options from a table (opts.h): parsing, range and choice checks, --help, canonical values.
#include "core/opts.h"
#include "core/err.h"
#include "core/numtext.h"
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// the choices "a|b|c" as "a, b or c"
static void choice_list(const char *choices, char *out, size_t n) {
    size_t k = 0;
    const char *last = strrchr(choices, '|');
    for (const char *c = choices; *c && k + 8 < n; c++) {
        if (*c != '|') out[k++] = *c;
        else k += (size_t)snprintf(out + k, n - k, c == last ? " or " : ", ");
    }
    out[k < n ? k : n - 1] = 0;
}

static int same_char(char a, char b) { return a == b || (a == '-' && b == '_') || (a == '_' && b == '-'); }

// name[0..len) spells o's name ('-' for '_' allowed)
static int spells_as(const char *nm, const char *name, size_t len) {
    if (strlen(nm) != len) return 0;
    for (size_t i = 0; i < len; i++)
        if (!same_char(nm[i], name[i])) return 0;
    return 1;
}

// name[0..len) is o's name, or its "--" alias, each spelt with '-' or '_' alike
static int spells(const os_opt *o, const char *name, size_t len) {
    return spells_as(o->name, name, len) || (o->alias && !strncmp(o->alias, "--", 2) && spells_as(o->alias + 2, name, len));
}

// edit distance between a[0..la) and b, '-' and '_' alike (short names: a small table on the stack)
static size_t distance(const char *a, size_t la, const char *b) {
    size_t lb = strlen(b), row[128];
    if (la >= 127 || lb >= 127) return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + !same_char(a[i - 1], b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best, diag = up;
        }
    }
    return row[lb];
}

const os_opt *os_opts_nearest(const os_opt_cmd *c, const char *name, size_t len) {
    const os_opt *best = NULL;
    size_t bd = SIZE_MAX;
    for (int g = 0; g < c->ngroups; g++)
        for (int i = 0; i < c->groups[g].n; i++) {
            size_t d = distance(name, len, c->groups[g].opts[i].name);
            if (d < bd) bd = d, best = &c->groups[g].opts[i];
        }
    // a name further than a slip of the fingers from every option has no nearest worth suggesting
    // (--padding_free is not a misspelt --learning_rate)
    size_t cap = len / 3 > 2 ? len / 3 : 2;
    return bd <= cap ? best : NULL;
}

static void usage_line(const os_opt *o, FILE *f) {
    char extra[256] = "", names[64];
    if (o->range) snprintf(extra, sizeof extra, "; range %s", o->range);
    if (o->type == OS_OPT_CHOICE) {
        char l[200];
        choice_list(o->choices, l, sizeof l);
        snprintf(extra, sizeof extra, "; supported: %s", l);
    }
    static const char *const METAVAR[] = {"TEXT", "CHOICE", "X", "N", "N", "BOOL", "", "zeroN", "VALUE"};
    const char *mv = o->metavar ? o->metavar : METAVAR[o->type];
    snprintf(names, sizeof names, "%s%s--%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name,
             *mv ? " " : "", mv);
    fprintf(f, "  %-34s %s%s\n", names, o->help, extra);
}

// the section of g named o->section, or -1 (none listed)
static int section_of(const os_opt_group *g, const os_opt *o) {
    for (int s = 0; s < g->nsections; s++)
        if (o->section && !strcmp(o->section, g->sections[s].name)) return s;
    return -1;
}

void os_opts_usage(const os_opt_cmd *c, FILE *f) {
    fputs(c->usage, f);
    for (int g = 0; g < c->ngroups; g++) {
        const os_opt_group *gr = &c->groups[g];
        fprintf(f, "\n%s (--name value or --name=value; '-' for '_' also works; a boolean alone means true):\n", gr->title);
        if (!gr->sections) {
            for (int i = 0; i < gr->n; i++) usage_line(&gr->opts[i], f);
            continue;
        }
        for (int k = 0; k <= gr->nsections; k++) {   // the listed sections, then (sec -1) the options of none
            int sec = k < gr->nsections ? k : -1, any = 0;
            for (int i = 0; i < gr->n; i++) {
                if (section_of(gr, &gr->opts[i]) != sec) continue;
                if (!any++) fprintf(f, "\n %s: %s\n", sec >= 0 ? gr->sections[sec].name : "other",
                                    sec >= 0 ? gr->sections[sec].title : "options of no section");
                usage_line(&gr->opts[i], f);
            }
        }
    }
    if (c->notes) fprintf(f, "\n%s", c->notes);
}

void os_opts_defaults(const os_opt *opts, int n, void *obj) {
    for (int i = 0; i < n; i++)   // the first choice: a static copy per choices string's table entry
        if (opts[i].type == OS_OPT_CHOICE) {
            static _Thread_local struct {
                const os_opt *o;
                char text[64];
            } first[256];
            int k = 0;
            while (k < 255 && first[k].o && first[k].o != &opts[i]) k++;
            first[k].o = &opts[i];
            snprintf(first[k].text, sizeof first[k].text, "%.*s", (int)strcspn(opts[i].choices, "|"), opts[i].choices);
            *(const char **)((char *)obj + opts[i].off) = first[k].text;
        }
}

// x within o's range ("[lo,hi)" etc.); -1 + message naming the option, the range and the value when not
static int in_range(const os_opt *o, double x, const char *v) {
    char lb, rb;
    double lo, hi;
    OS_ASSERT(o->range && sscanf(o->range, "%c%lf,%lf%c", &lb, &lo, &hi, &rb) == 4);   // every number has a range
    int ok = (lb == '[' ? x >= lo : x > lo) && (rb == ']' ? x <= hi : x < hi);
    return ok ? 0 : os_errf("--%s: expected a value in %s, got '%s'", o->name, o->range, v);
}

static int is_bool_text(const char *v, int *out) {
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1")) return *out = 1, 1;
    if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0")) return *out = 0, 1;
    return 0;
}

// choices that are another spelling of one value: stored (and agreed on) as the canonical one
static const char *const choice_alias[][2] = {{"fp32", "float32"}, {"bf16", "bfloat16"}, {"True", "true"}, {"False", "false"}};

const char *os_opts_canonical_choice(const char *v) {
    for (size_t i = 0; i < sizeof choice_alias / sizeof choice_alias[0]; i++)
        if (!strcmp(v, choice_alias[i][0])) return choice_alias[i][1];
    return v;
}

static int parse_value(void *obj, const os_opt *o, const char *v) {
    if (o->unset && !strcmp(v, o->unset)) return 0;
    void *dst = (char *)obj + o->off;
    switch (o->type) {
    case OS_OPT_STR: *(const char **)dst = v; return 0;
    case OS_OPT_CHOICE: {
        for (const char *c = o->choices; *c; c += strcspn(c, "|"), c += *c == '|') {
            size_t k = strcspn(c, "|");
            if (strlen(v) == k && !strncmp(c, v, k)) return *(const char **)dst = os_opts_canonical_choice(v), 0;
        }
        char l[200];
        choice_list(o->choices, l, sizeof l);
        return os_errf("--%s: '%s' is not supported (supported: %s)", o->name, v, l);
    }
    case OS_OPT_F64: {
        double x;
        if (os_parse_decimal(v, &x) < 0) return os_errf("--%s: expected a decimal number, got '%s'", o->name, v);
        *(double *)dst = x;
        return in_range(o, x, v);
    }
    case OS_OPT_I64:
    case OS_OPT_INT: {
        long long x;
        int small = o->type == OS_OPT_INT;
        if (os_parse_decimal_int(v, small ? INT_MIN : LLONG_MIN, small ? INT_MAX : LLONG_MAX, &x) < 0)
            return os_errf("--%s: expected a decimal integer, got '%s'", o->name, v);
        if (o->type == OS_OPT_I64) *(int64_t *)dst = x;
        else *(int *)dst = (int)x;
        return in_range(o, (double)x, v);
    }
    case OS_OPT_BOOL:
        if (!is_bool_text(v, (int *)dst)) return os_errf("--%s: expected true or false, got '%s'", o->name, v);
        return 0;
    case OS_OPT_FLAG: *(int *)dst = 1; return 0;
    case OS_OPT_STAGE:
        if (strncmp(v, "zero", 4) || v[4] < '0' || v[4] > '3' || v[5])
            return os_errf("--%s: expected zero0, zero1, zero2 or zero3, got '%s'", o->name, v);
        *(int *)dst = v[4] - '0';
        return 0;
    case OS_OPT_CUSTOM: return o->parse(obj, v);
    }
    return 0;
}

// the option named name[0..len) (or spelt as its alias) and the struct it fills, marked given; NULL when none
static const os_opt *lookup(const os_opt_cmd *c, const char *arg, const char *name, size_t len, void **obj) {
    for (int g = 0; g < c->ngroups; g++)
        for (int i = 0; i < c->groups[g].n; i++) {
            const os_opt *o = &c->groups[g].opts[i];
            if (!(name && spells(o, name, len)) && !(o->alias && !strcmp(o->alias, arg))) continue;
            if (c->given && c->given[g]) c->given[g][i] = 1;
            return *obj = c->groups[g].obj, o;
        }
    return NULL;
}

// the known name name[0..len) is spelt as ('-' for '_' alike), or NULL
static const os_opt_known *known(const os_opt_cmd *c, const char *name, size_t len) {
    for (int i = 0; i < c->nknown; i++)
        if (spells_as(c->known[i].name, name, len)) return &c->known[i];
    return NULL;
}

void os_opts_known_notes(const os_opt_known *known, int n, const unsigned char *given, const char *command) {
    for (int i = 0; i < n; i++)
        if (given[i] && known[i].no_effect)
            os_info("omnishard %s: --%s accepted, no effect here: %s", command, known[i].name, known[i].reason);
}

// appends "; " + the stored message to text[k..n)
static size_t add_error(char *text, size_t k, size_t n) {
    if (k < n) k += (size_t)snprintf(text + k, n - k, "%s%s", k ? "; " : "", os_errmsg());
    return k;
}

int os_opts_parse(const os_opt_cmd *c, int argc, char **argv) {
    char text[3000];
    size_t k = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return 1;
        int dashes = !strncmp(arg, "--", 2);
        const char *name = dashes ? arg + 2 : NULL, *eq = dashes ? strchr(name, '=') : NULL;
        size_t nlen = name ? (eq ? (size_t)(eq - name) : strlen(name)) : 0;
        void *obj = NULL;
        const os_opt *o = lookup(c, arg, name, nlen, &obj);
        if (!o && !dashes && c->positional && !*c->pos) {
            *c->pos = arg;
            continue;
        }
        if (!o) {
            const os_opt_known *kn = dashes ? known(c, name, nlen) : NULL;
            if (kn && kn->no_effect) {   // accepted with its value, which changes nothing
                c->known_given[kn - c->known] = 1;
                if (!eq && i + 1 < argc && strncmp(argv[i + 1], "--", 2)) i++;
                continue;
            }
            if (!dashes) os_errf("unexpected argument '%s' (options start with --)", arg);
            else if (kn) {
                os_errf("unknown option '--%s' (ms-swift's; not in omnishard): %s", kn->name, kn->reason);
                if (!eq && i + 1 < argc && strncmp(argv[i + 1], "--", 2)) i++;   // its value, most likely
            } else {
                const os_opt *near = os_opts_nearest(c, name, nlen);
                os_errf("unknown option '--%.*s'%s%s%s", (int)nlen, name, near ? " (nearest: --" : "",
                        near ? near->name : "", near ? ")" : "");
                if (!eq && i + 1 < argc && strncmp(argv[i + 1], "--", 2)) i++;   // its value, most likely
            }
            k = add_error(text, k, sizeof text);
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (o->type == OS_OPT_FLAG && v) {
            os_errf("--%s takes no value (got '%s')", o->name, v);
            k = add_error(text, k, sizeof text);
            continue;
        }
        // a boolean takes the next word unless it is another option or there is none: then it is true
        int bare = o->type == OS_OPT_FLAG || (o->type == OS_OPT_BOOL && !v && (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2)));
        if (bare) v = "true";
        else if (!v) v = i + 1 < argc ? argv[++i] : NULL;
        if (!v) os_errf("option '--%s' needs a value", o->name);
        if (v && o->list && o->parse(obj, NULL) == 0)   // the first word, then each before the next --option
            while (!eq && i + 1 < argc && strncmp(argv[i + 1], "--", 2) && o->parse(obj, v) == 0) v = argv[++i];
        if (!v || parse_value(obj, o, v) < 0) k = add_error(text, k, sizeof text);
    }
    return k ? os_errf("%s (omnishard %s --help lists the options)", text, c->command) : 0;
}

void os_opts_value(const os_opt *o, const void *obj, char *buf, size_t n) {
    const void *src = (const char *)obj + o->off;
    switch (o->type) {
    case OS_OPT_STR:
    case OS_OPT_CHOICE: {
        const char *s = *(const char *const *)src;
        snprintf(buf, n, "%s", s ? s : "(not given)");
        break;
    }
    case OS_OPT_F64: os_double_str(*(const double *)src, buf, n); break;
    case OS_OPT_I64: snprintf(buf, n, "%lld", (long long)*(const int64_t *)src); break;
    case OS_OPT_INT: snprintf(buf, n, "%d", *(const int *)src); break;
    case OS_OPT_BOOL:
    case OS_OPT_FLAG: {   // < 0: not given (decided later, e.g. by the model directory)
        int v = *(const int *)src;
        snprintf(buf, n, "%s", v < 0 ? "(not given)" : v ? "true" : "false");
        break;
    }
    case OS_OPT_STAGE: snprintf(buf, n, "zero%d", *(const int *)src); break;
    case OS_OPT_CUSTOM: o->show(obj, buf, n); break;
    }
}
