#include "core/err.h"
#include <signal.h>
#include <stdarg.h>
#include <string.h>

int os_rank = -1;
volatile sig_atomic_t os_stop_signal;

void os_on_stop_signals(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
static _Thread_local char g_msg[4096];
static _Thread_local int g_echo;
static void (*g_hook)(int) = NULL;

static void vset(int echo, const char *fmt, va_list ap) {
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    g_echo = echo;
}

int os_errf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vset(0, fmt, ap);
    va_end(ap);
    return -1;
}

int os_err_echo(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vset(1, fmt, ap);
    va_end(ap);
    return -1;
}

int os_err_is_echo(void) { return g_echo; }

int os_err_ctx(const char *fmt, ...) {
    char pre[1024], old[sizeof g_msg - 1100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    size_t n = strnlen(g_msg, sizeof old - 1);
    memcpy(old, g_msg, n);
    old[n] = 0;
    snprintf(g_msg, sizeof g_msg, "%s: %s", pre, old);
    return -1;
}

const char *os_errmsg(void) { return g_msg[0] ? g_msg : "unknown error"; }

void os_set_abort_hook(void (*hook)(int code)) { g_hook = hook; }

static void vreport(const char *fmt, va_list ap) {
    char buf[sizeof g_msg + 64];
    int n = os_rank >= 0 ? snprintf(buf, sizeof buf, "omnishard: rank %d: ", os_rank)
                         : snprintf(buf, sizeof buf, "omnishard: ");
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", buf);
    fflush(stderr);
}

_Noreturn void os_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (g_hook) {
        void (*h)(int) = g_hook;
        g_hook = NULL;
        h(1);
    }
    exit(1);
}

_Noreturn void os_die_err(void) { os_die("%s", os_errmsg()); }

void os_report(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
}

void os_info(const char *fmt, ...) {
    if (os_rank > 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

const char *os_shape_str(const int64_t *shape, int ndim, char *buf, int n) {
    int k = snprintf(buf, (size_t)n, "[");
    for (int i = 0; i < ndim && k < n; i++) k += snprintf(buf + k, (size_t)(n - k), i ? ", %lld" : "%lld", (long long)shape[i]);
    if (k < n) snprintf(buf + k, (size_t)(n - k), "]");
    return buf;
}
