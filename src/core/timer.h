#pragma once
// monotonic wall-clock seconds
double os_now(void);
// CPU seconds used by this process so far (all its threads)
double os_cpu_now(void);
