// The CUDA backend's runtime (cu_runtime.h): the device of this rank, its stream, the checks.
#include "cuda/cu_runtime.h"
#include "core/err.h"
#include <stdlib.h>

static cudaStream_t g_stream;
static int g_dev = -1;

cudaStream_t cu_stream(void) { return g_stream; }
int cu_device(void) { return g_dev; }

void cu_check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) os_die("CUDA backend: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

// the rank's index among the processes of its node, as the launcher says (Open MPI, then MPICH/Hydra, then Slurm);
// 0 outside a launcher
static int local_rank(void) {
    const char *names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        char *end;
        long r = v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && r >= 0) return (int)r;
    }
    return 0;
}

static const char *visible(void) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    return v ? v : "(not set)";
}

int cu_runtime_open(int index, struct cudaDeviceProp *p) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return os_errf("--device cuda: no usable CUDA device: %s (%s; CUDA_VISIBLE_DEVICES=%s)", cudaGetErrorString(e),
                       cudaGetErrorName(e), visible());
    if (n < 1) return os_errf("--device cuda: no CUDA device visible (CUDA_VISIBLE_DEVICES=%s)", visible());
    int dev = index >= 0 ? index : local_rank() % n;
    if (dev >= n)
        return os_errf("--device cuda:%d: %d device(s) visible (cuda:0 .. cuda:%d; CUDA_VISIBLE_DEVICES=%s)", dev, n,
                       n - 1, visible());
    if ((e = cudaGetDeviceProperties(p, dev)) == cudaSuccess && p->major < 8)
        return os_errf("--device cuda:%d: %s has compute capability %d.%d; omnishard's CUDA backend needs 8.0 or "
                       "later (A100, H100, H200)", dev, p->name, p->major, p->minor);
    if (e == cudaSuccess) e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) return os_errf("--device cuda:%d: %s (%s)", dev, cudaGetErrorString(e), cudaGetErrorName(e));
    g_dev = dev;
    return 0;
}
