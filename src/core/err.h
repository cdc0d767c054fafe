// Errors with context. Library code reports user errors by returning -1 (or NULL) after calling os_errf(),
// which stores "path: field: what is wrong" in a thread-local buffer; the CLI prints it with os_die().
// OS_ASSERT is for omnishard's own bugs only.
#pragma once
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// store a formatted message (replaces the previous one); always returns -1
int os_errf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// prefix the stored message with "prefix: " (adds context while unwinding); returns -1
int os_err_ctx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *os_errmsg(void);
// like os_errf, for a rank that stops only because another rank failed: the run's stop message then prefers the
// failing rank's own message (train/stop.h)
int os_err_echo(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int os_err_is_echo(void);   // 1 when the stored message was set by os_err_echo

// The rank shown in messages ("rank 3: ..."); -1 when not running under MPI.
extern int os_rank;
// The signal (SIGINT, SIGTERM) that asked this process to stop, 0 = none; set by the handlers of train/stop.c and
// infer/infer_stop.c.
extern volatile sig_atomic_t os_stop_signal;
// handler for SIGINT and SIGTERM (each blocked while it runs; interrupted system calls restarted)
void os_on_stop_signals(void (*handler)(int));
// Called by os_die before exit, e.g. to stop every MPI rank. Receives the exit code.
void os_set_abort_hook(void (*hook)(int code));
// Print "omnishard: [rank R: ]message" on stderr and stop this process (and, via the hook, every rank).
_Noreturn void os_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// os_die with the stored error message
_Noreturn void os_die_err(void);
// the line os_die prints, without stopping (every rank prints its own)
void os_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// informational line on stderr, from rank 0 (or rank -1) only
void os_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define OS_ASSERT(c)                                                                                  \
    do {                                                                                              \
        if (!(c)) os_die("internal error: %s:%d: assertion '%s' failed", __FILE__, __LINE__, #c);     \
    } while (0)

// "[d0, d1, ...]" of a shape of ndim dims into buf[n] (for messages); returns buf
const char *os_shape_str(const int64_t *shape, int ndim, char *buf, int n);
