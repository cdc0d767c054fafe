// --device of sft, infer, export and mel --encoder: the backend os_k runs on (the CPU's, the guard's, or CUDA's).
#pragma once

// device: cpu | cuda | cuda:N | guard | guard:lax (core/device.h). cpu keeps os_k (the CPU backend); guard sets the
// guard backend (kernels/ops.h, strict unless guard:lax); cuda opens the CUDA backend (cuda/cuda.h) and sets os_k
// to it. 0, or -1 with the reason in os_errmsg (a build without CUDA, no driver or GPU: the CUDA error string)
int os_cli_device_open(const char *device, int tf32);
// at the end of a run on the CUDA backend: its memory counters on stderr (rank 0; nothing on the CPU)
void os_cli_device_report(void);
