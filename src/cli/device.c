// --device (cli/device.h).
#include "cli/device.h"
#include "core/device.h"
#include "core/err.h"
#include "cuda/cuda.h"
#include "kernels/ops.h"

int os_cli_device_open(const char *device, int tf32) {
    int index, kind = os_device_parse(device, &index);
    if (kind < 0) return -1;
    if (kind == OS_DEVICE_CPU) return 0;   // os_k: the CPU backend
    if (kind == OS_DEVICE_GUARD) {
        os_guard_set_strict(index);
        os_k = os_ops_guard();
        return 0;
    }
    const os_ops *t = os_cuda_open(index, tf32);
    if (!t) return -1;
    os_k = t;
    os_dc = os_cuda_devcomm();   // zero/transport.c decides after MPI starts whether NCCL runs the collectives
    return 0;
}

void os_cli_device_report(void) {
    if (!os_cuda_built() || os_k != os_ops_cuda()) return;
    os_cuda_mem m = os_cuda_mem_stats();
    const double GB = 1e9;
    os_info("device memory: peak %.3f GB requested (%.3f GB in the allocator's size classes), %.3f GB held from "
            "cudaMalloc at most; the device's used memory peaked at %.3f GB of %.3f GB (cudaMemGetInfo)",
            (double)m.peak_requested / GB, (double)m.peak_in_use / GB, (double)m.peak_reserved / GB,
            (double)m.device_used_peak / GB, (double)m.device_total / GB);
}
