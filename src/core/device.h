// --device, as ms-swift spells it (sft, infer, plan): cpu (the default), cuda (each rank its launcher's local rank
// % the GPUs visible), cuda:N (GPU N of those visible). docs/operations.md "GPUs".
#pragma once

// 0 for cpu, 1 for cuda with *index the GPU (-1: by local rank); -1 with the message in os_errmsg
int os_device_parse(const char *v, int *index);
// --tf32 against the device and the precision: TF32 is a CUDA GPU's format for fp32 products only. 0 or -1 + message
int os_tf32_check(int tf32, const char *device, int bf16);
