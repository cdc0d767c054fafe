// --device (cli/device.h).
#include "cli/device.h"
#include "core/device.h"
#include "core/err.h"
#include "core/knobs.h"
#include "cuda/cuda.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include <string.h>

static const os_ops *opened(const char *device, int tf32, int bf16) {
    int index, kind = os_device_parse(device, &index);
    if (kind < 0) return NULL;
    if (bf16 && k_gemm_bf16_setup(NULL, NULL) < 0) return NULL;   // the CPU's bf16 path (OMNISHARD_BF16_GEMM's, main.c)
    if (kind == OS_DEVICE_CPU) return os_ops_cpu_open(bf16);   // the CPU backend in the precision asked
    if (kind == OS_DEVICE_GUARD) {
        os_guard_set_strict(index);
        return os_ops_guard_open(bf16);
    }
    const os_ops *t = os_cuda_open(index, tf32, bf16);
    if (t) os_dc = os_cuda_devcomm();   // zero/transport.c decides after MPI starts whether NCCL runs the collectives
    return t;
}

int os_cli_device_open(const char *device, int tf32, int bf16) {
    const os_ops *t = opened(device, tf32, bf16);
    if (!t) return -1;
    // OMNISHARD_COUNT_OPS (a test hook): the seam's calls counted per member, written at exit (cli/main.c)
    os_k = os_knobs()->count_ops ? os_ops_count(t) : t;
    return 0;
}

void os_cli_device_report(void) {
    if (!os_cuda_built() || strcmp(os_k->name, "cuda")) return;
    os_cuda_mem m = os_cuda_mem_stats();
    const double GB = 1e9;
    os_info("device memory: peak %.3f GB requested (%.3f GB in the allocator's size classes), %.3f GB held from "
            "cudaMalloc at most; the device's used memory peaked at %.3f GB of %.3f GB (cudaMemGetInfo)",
            (double)m.peak_requested / GB, (double)m.peak_in_use / GB, (double)m.peak_reserved / GB,
            (double)m.device_used_peak / GB, (double)m.device_total / GB);
}
