#pragma once
#include <stddef.h>
// monotonic wall-clock seconds
double os_now(void);
// CPU seconds used by this process so far (all its threads)
double os_cpu_now(void);
// seconds as "45s", "2m 5s", "1h 2m 3s", "2d 1h 0m 9s" (rounded to whole seconds; ms-swift's spelling); "?" when
// not finite or negative
void os_format_duration(double seconds, char *buf, size_t n);
