#pragma once
// monotonic wall-clock seconds
double os_now(void);
