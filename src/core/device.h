// --device, as ms-swift spells it (sft, infer, plan, export, mel --encoder): cpu (the default), cuda (each rank its
// launcher's local rank % the GPUs visible), cuda:N (GPU N of those visible), and guard (a test backend: the CPU
// kernels on memory out of the host's reach, run as on a device's stream; guard:lax lets a call given host memory
// run). docs/operations.md "GPUs", docs/design.md "The guard backend".
#pragma once

enum { OS_DEVICE_CPU, OS_DEVICE_CUDA, OS_DEVICE_GUARD };
#define OS_DEVICE_VALUES "cpu|cuda|cuda:N|guard|guard:lax"

// OS_DEVICE_CPU; OS_DEVICE_CUDA with *index the GPU (-1: by local rank); OS_DEVICE_GUARD with *index 1 (strict:
// guard) or 0 (guard:lax); -1 with the message in os_errmsg
int os_device_parse(const char *v, int *index);
// --tf32 against the device and the precision: TF32 is a CUDA GPU's format for fp32 products only. 0 or -1 + message
int os_tf32_check(int tf32, const char *device, int bf16);
