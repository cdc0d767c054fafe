// sft's options in sections (train/args.h): each option of the table names the section of os_sft_args its value
// lives in (the field at its offset), every section has options, and --help (core/opts.c) lists each option
// once, under its section's heading, in the sections' order; an option of no listed section goes under "other".
#include "check.h"
#include "core/opts.h"
#include "train/args.h"
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define SEC(s) {#s, offsetof(os_sft_args, s), sizeof(((os_sft_args *)0)->s)}
static const struct {
    const char *name;
    size_t off, size;
} LAYOUT[] = {SEC(model), SEC(data), SEC(training), SEC(checkpoint), SEC(parallelism), SEC(logging), SEC(device), SEC(debug)};
#undef SEC
enum { NLAYOUT = sizeof LAYOUT / sizeof LAYOUT[0] };

// the section of os_sft_args holding byte `off`, or NULL
static const char *holding(size_t off) {
    for (int s = 0; s < NLAYOUT; s++)
        if (off >= LAYOUT[s].off && off < LAYOUT[s].off + LAYOUT[s].size) return LAYOUT[s].name;
    return NULL;
}

static void table_names_the_fields_section(void) {
    int n, ns, per[NLAYOUT] = {0};
    const os_opt *o = os_sft_options(&n);
    const os_opt_section *sec = os_sft_sections(&ns);
    CHECK(ns == NLAYOUT, "%d sections listed, os_sft_args has %d", ns, (int)NLAYOUT);
    for (int s = 0; s < ns && s < NLAYOUT; s++)
        CHECK(!strcmp(sec[s].name, LAYOUT[s].name) && sec[s].title && *sec[s].title,
              "section %d: '%s', os_sft_args's is '%s'", s, sec[s].name, LAYOUT[s].name);
    for (int i = 0; i < n; i++) {
        const char *h = holding(o[i].off);
        CHECK(o[i].section && h && !strcmp(o[i].section, h), "--%s: section '%s', its value is in '%s'", o[i].name,
              o[i].section ? o[i].section : "(none)", h ? h : "(none)");
        for (int s = 0; s < NLAYOUT; s++) per[s] += h && !strcmp(h, LAYOUT[s].name);
    }
    for (int s = 0; s < NLAYOUT; s++) CHECK(per[s] > 0, "section %s has no option", LAYOUT[s].name);
}

// --help of a small table: the headings in order, each option once under its own, one of no section under "other"
static void usage_groups_by_section(void) {
    struct {
        const char *a, *b, *c, *d;
    } x = {0};
    const os_opt opts[] = {
        {.name = "alpha", .off = offsetof(__typeof__(x), a), .type = OS_OPT_STR, .help = "A", .section = "two"},
        {.name = "beta", .off = offsetof(__typeof__(x), b), .type = OS_OPT_STR, .help = "B", .section = "one"},
        {.name = "gamma", .off = offsetof(__typeof__(x), c), .type = OS_OPT_STR, .help = "C"},
        {.name = "delta", .off = offsetof(__typeof__(x), d), .type = OS_OPT_STR, .help = "D", .section = "two"},
    };
    const os_opt_section secs[] = {{"one", "the first"}, {"two", "the second"}, {"three", "none of its own"}};
    const os_opt_group g = {.title = "options", .opts = opts, .n = 4, .obj = &x, .sections = secs, .nsections = 3};
    const os_opt_cmd c = {.command = "t", .usage = "usage\n", .groups = &g, .ngroups = 1};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    os_opts_usage(&c, f);
    fclose(f);
    const char *one = strstr(text, "\n one: the first\n"), *two = strstr(text, "\n two: the second\n");
    const char *other = strstr(text, "\n other: "), *al = strstr(text, "--alpha"), *be = strstr(text, "--beta");
    const char *ga = strstr(text, "--gamma"), *de = strstr(text, "--delta");
    CHECK(one && two && other && one < be && be < two && two < al && al < de && de < other && other < ga,
          "headings and options out of order:\n%s", text);
    CHECK(!strstr(text, "three"), "a section without options has no heading:\n%s", text);
    CHECK(al && !strstr(al + 1, "--alpha") && ga && !strstr(ga + 1, "--gamma"), "an option twice:\n%s", text);
    free(text);
}

int main(void) {
    table_names_the_fields_section();
    usage_groups_by_section();
    return check_report("test_sft_sections");
}
