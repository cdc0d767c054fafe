// --device of sft and infer: the backend os_k runs on (the CPU's, OMNISHARD_BACKEND=guard's, or CUDA's).
#pragma once

// device: cpu | cuda | cuda:N (core/device.h). cpu keeps os_k (the CPU backend, or the guard one); cuda opens the
// CUDA backend (cuda/cuda.h) and sets os_k to it. 0, or -1 with the reason in os_errmsg (a build without CUDA, no
// driver or GPU: the CUDA error string, the guard hook beside it)
int os_cli_device_open(const char *device, int tf32);
// at the end of a run on the CUDA backend: its memory counters on stderr (rank 0; nothing on the CPU)
void os_cli_device_report(void);
