// --device of sft, infer, export and mel --encoder: the backend os_k runs on (the CPU's, the guard's, or CUDA's).
#pragma once

// device: cpu | cuda | cuda:N | guard | guard:lax (core/device.h), opened with its products' precision (bf16 1: bf16
// mixed precision, --torch_dtype bfloat16; the backend's os_ops.bf16) and set as os_k: cpu the CPU backend, guard
// the guard backend (kernels/ops.h, strict unless guard:lax), cuda the CUDA backend (cuda/cuda.h). 0, or -1 with the
// reason in os_errmsg (a build without CUDA, no driver or GPU: the CUDA error string; a bf16 path the CPU cannot run)
int os_cli_device_open(const char *device, int tf32, int bf16);
// at the end of a run on the CUDA backend: its memory counters on stderr (rank 0; nothing on the CPU)
void os_cli_device_report(void);
