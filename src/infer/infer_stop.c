// SIGINT / SIGTERM during omnishard infer --output_file (infer_stop.h).
#include "infer/infer_stop.h"
#include "core/err.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char g_line[2][200];   // the handler's line for SIGINT [0] and SIGTERM [1], complete before it is installed

// the first signal: the flag and the line; both signals then take their default action (a second one ends the process)
static void on_signal(int sig) {
    int saved = errno;
    signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
    os_stop_signal = sig;
    const char *l = g_line[sig == SIGTERM];
    ssize_t k = write(2, l, strlen(l));
    (void)k;
    errno = saved;
}

void os_infer_stop_install(void) {
    const char *nl = isatty(2) ? "\n" : "";   // after a progress line without its newline
    char who[32] = "";
    if (os_rank >= 0) snprintf(who, sizeof who, "rank %d: ", os_rank);
    for (int k = 0; k < 2; k++)
        snprintf(g_line[k], sizeof g_line[k], "%somnishard infer: %s%s received: the records being decoded are finished "
                 "and written, then the run stops (a second signal stops at once)\n", nl, who, k ? "SIGTERM" : "SIGINT");
    os_on_stop_signals(on_signal);
}
