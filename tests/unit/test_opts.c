// The option table (src/core/opts.c) every command parses with: spellings (--a-b for --a_b, --x=v), bare booleans,
// a value meaning "not given", every unknown option reported at once with its nearest name, ranges, --help.
#include "check.h"
#include "core/err.h"
#include "core/opts.h"
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const char *model, *kind;
    double learning_rate;
    int64_t max_steps;
    int freeze_llm, text_only, stage;
} args;

#define F(n) .name = #n, .off = offsetof(args, n)
static const os_opt OPTS[] = {
    {F(model), .type = OS_OPT_STR, .help = "m"},
    {F(kind), .type = OS_OPT_CHOICE, .choices = "full|lora", .help = "k"},
    {F(learning_rate), .type = OS_OPT_F64, .range = "[0,inf)", .help = "lr"},
    {F(max_steps), .type = OS_OPT_I64, .range = "[0,inf)", .unset = "-1", .help = "steps"},
    {F(freeze_llm), .type = OS_OPT_BOOL, .help = "f"},
    {F(text_only), .type = OS_OPT_FLAG, .help = "t"},
    {.name = "deepspeed", .off = offsetof(args, stage), .type = OS_OPT_STAGE, .help = "d"},
};
#undef F

static int parse(args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->max_steps = 7;
    os_opts_defaults(OPTS, (int)(sizeof OPTS / sizeof OPTS[0]), a);
    const os_opt_group g = {.title = "options", .opts = OPTS, .n = (int)(sizeof OPTS / sizeof OPTS[0]), .obj = a};
    const os_opt_cmd c = {.command = "test", .usage = "usage\n", .groups = &g, .ngroups = 1};
    return os_opts_parse(&c, argc, argv);
}

int main(void) {
    args a;
    char *v1[] = {"t", "--learning-rate", "0.5", "--model=m", "--freeze_llm", "--deepspeed", "zero3"};
    CHECK(parse(&a, 7, v1) == 0 && a.learning_rate == 0.5 && !strcmp(a.model, "m") && a.freeze_llm == 1 && a.stage == 3,
          "dashes, =, a bare boolean before another option: %s", os_errmsg());
    CHECK(!strcmp(a.kind, "full"), "a choice defaults to its first value");
    char *v2[] = {"t", "--freeze_llm", "false", "--text_only", "--freeze-llm"};
    CHECK(parse(&a, 5, v2) == 0 && a.freeze_llm == 1 && a.text_only == 1, "a bare boolean at the end: %s", os_errmsg());
    char *v3[] = {"t", "--freeze_llm", "false"};
    CHECK(parse(&a, 3, v3) == 0 && a.freeze_llm == 0, "a boolean with its value");
    char *v4[] = {"t", "--max_steps", "-1"};
    CHECK(parse(&a, 3, v4) == 0 && a.max_steps == 7, "-1 means not given: the default stays (%lld)", (long long)a.max_steps);
    char *v5[] = {"t", "--max_steps", "-2"};
    CHECK(parse(&a, 3, v5) < 0 && strstr(os_errmsg(), "--max_steps: expected a value in [0,inf), got '-2'"), "%s", os_errmsg());
    char *v6[] = {"t", "--learning_rat", "1", "--modle", "x", "--kind", "half", "--frezee_llm"};
    CHECK(parse(&a, 8, v6) < 0, "unknown options fail");
    const char *m = os_errmsg();
    CHECK(strstr(m, "unknown option '--learning_rat' (nearest: --learning_rate)") &&
              strstr(m, "unknown option '--modle' (nearest: --model)") &&
              strstr(m, "--kind: 'half' is not supported (supported: full or lora)") &&
              strstr(m, "unknown option '--frezee_llm' (nearest: --freeze_llm)") && strstr(m, "omnishard test --help"),
          "every problem at once, each unknown option with its nearest name: %s", m);
    char *v7[] = {"t", "--text_only=1"};
    CHECK(parse(&a, 2, v7) < 0 && strstr(os_errmsg(), "--text_only takes no value"), "%s", os_errmsg());
    char *v8[] = {"t", "--model"};
    CHECK(parse(&a, 2, v8) < 0 && strstr(os_errmsg(), "option '--model' needs a value"), "%s", os_errmsg());
    char *v9[] = {"t", "stray"};
    CHECK(parse(&a, 2, v9) < 0 && strstr(os_errmsg(), "unexpected argument 'stray'"), "%s", os_errmsg());
    char *v10[] = {"t", "--model", "m", "-h"};
    CHECK(parse(&a, 4, v10) == 1, "--help");
    char buf[64];
    a.freeze_llm = -1;
    os_opts_value(&OPTS[4], &a, buf, sizeof buf);
    CHECK(!strcmp(buf, "(not given)"), "a boolean below 0 is not given: %s", buf);
    a.stage = 2;
    os_opts_value(&OPTS[6], &a, buf, sizeof buf);
    CHECK(!strcmp(buf, "zero2"), "%s", buf);
    return check_report("test_opts");
}
