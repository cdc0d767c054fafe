#include "core/timer.h"
#include <stdio.h>
#include <time.h>
double os_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
double os_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
void os_format_duration(double seconds, char *buf, size_t n) {
    if (!(seconds >= 0) || seconds > 1e15) {   // NaN, negative, or no estimate yet
        snprintf(buf, n, "?");
        return;
    }
    long long s = (long long)(seconds + 0.5), d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;
    s %= 60;
    if (d) snprintf(buf, n, "%lldd %lldh %lldm %llds", d, h, m, s);
    else if (h) snprintf(buf, n, "%lldh %lldm %llds", h, m, s);
    else if (m) snprintf(buf, n, "%lldm %llds", m, s);
    else snprintf(buf, n, "%llds", s);
}
