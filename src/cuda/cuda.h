// The CUDA backend of the device seam as the command line sees it (src/cuda/; only cli/ includes this header).
// `make CUDA=1` builds the backend (ops_cuda.c, cu_*.c, *.cu); a plain `make` builds cuda_none.c instead, whose
// os_cuda_open says the binary has no CUDA backend. docs/design.md "The CUDA backend".
#pragma once
#include "kernels/devcomm.h"
#include "kernels/ops.h"
#include <stddef.h>
#include <stdint.h>

// 1 when this binary has the CUDA backend (make CUDA=1), else 0
int os_cuda_built(void);
// Opens the backend on device `index` (-1: the rank's local rank % the devices visible; CUDA_VISIBLE_DEVICES
// chooses which those are) with fp32 products in TF32 when tf32 is 1, in bf16 mixed precision when bf16 is 1 (the
// table's precision, os_ops.bf16; opening it again sets it); the table to set os_k to, or NULL with the reason in
// os_errmsg (no CUDA backend built, no driver or device, compute capability below 8.0, no cuBLASLt)
const os_ops *os_cuda_open(int index, int tf32, int bf16);

// The backend's memory (its caching allocator; all 0 before os_cuda_open): bytes asked for now and at most (what
// omnishard plan --device cuda counts), the same in the allocator's size classes, bytes held from cudaMalloc now
// and at most, and the device's used memory at its highest as cudaMemGetInfo saw it after each cudaMalloc (the
// CUDA context included, and every other process on the device; total: its size)
typedef struct {
    int64_t requested, peak_requested, in_use, peak_in_use, reserved, peak_reserved, device_used_peak, device_total;
} os_cuda_mem;
os_cuda_mem os_cuda_mem_stats(void);

// the floats of attention_fwd's stats on the CUDA backend (its fused kernel's log-sum-exp per query row, B*H*T):
// what omnishard plan --device cuda counts, in any build
int64_t os_cuda_attention_stats_floats(int64_t B, int64_t T, int64_t H);
// NCCL between GPUs for zero/comm.c (cu_nccl.c; its library is loaded only when zero/transport.c may choose it); NULL in a build
// without CUDA
const os_devcomm *os_cuda_devcomm(void);
// the table itself, opened or not (NULL in a build without CUDA)
const os_ops *os_ops_cuda(void);
