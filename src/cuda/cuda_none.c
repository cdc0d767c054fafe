// The CUDA backend's entry in a build without it (plain `make`; `make CUDA=1` builds cu_runtime.c instead):
// --device cuda names the build that has it.
#include "cuda/cuda.h"
#include "core/err.h"

int os_cuda_built(void) { return 0; }
const os_ops *os_ops_cuda(void) { return NULL; }
const os_devcomm *os_cuda_devcomm(void) { return NULL; }

const os_ops *os_cuda_open(int index, int tf32, int bf16) {
    (void)index, (void)tf32, (void)bf16;
    os_errf("--device cuda: this omnishard was built without the CUDA backend; build it with `make CUDA=1` "
            "(docs/operations.md \"GPUs\")");
    return NULL;
}

os_cuda_mem os_cuda_mem_stats(void) { return (os_cuda_mem){0}; }

// the CUDA kernels' count (cu_attention_stats_floats, src/cuda/cu_attention.cu; test_cuda_nogpu compares the two)
int64_t os_cuda_attention_stats_floats(int64_t B, int64_t T, int64_t H) { return B * H * T; }
