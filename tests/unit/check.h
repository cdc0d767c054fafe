// The check harness of the unit tests that report only failures (test_audio, test_logmel, test_tokenizer):
//   CHECK(cond, fmt, ...)  counts a check; when cond is false, counts a failure and prints
//                          "FAIL file:line: <message>" on stderr (the test goes on).
//   check_report(name)     prints the summary and returns main's exit status: 0 all passed, 1 some failed.
#pragma once
#include <stdio.h>

static int g_fail = 0, g_checks = 0;

#define CHECK(cond, ...)                                                                                        \
    do {                                                                                                        \
        g_checks++;                                                                                             \
        if (!(cond)) {                                                                                          \
            g_fail++;                                                                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                \
            fprintf(stderr, __VA_ARGS__);                                                                       \
            fputc('\n', stderr);                                                                                \
        }                                                                                                       \
    } while (0)

static inline int check_report(const char *name) {
    if (g_fail) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, g_fail, g_checks);
        return 1;
    }
    printf("%s: all %d checks passed\n", name, g_checks);
    return 0;
}
