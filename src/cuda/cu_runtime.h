// The CUDA backend's runtime (src/cuda/, built by `make CUDA=1` only): the device this rank uses, the one stream
// every kernel and cuBLASLt call of the backend runs on, and the checks every CUDA call goes through.
// Ordering: everything the backend issues goes to cu_stream() in call order, so two ops need no event between
// them; the host waits only in the table's download (docs/design.md "The CUDA backend").
// Included by src/cuda/*.c and *.cu only (cli/ reaches the backend through cuda/cuda.h).
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// the backend's compute stream (created by the backend's open on the selected device; a non-blocking stream)
cudaStream_t cu_stream(void);
// the device index this process uses (after CUDA_VISIBLE_DEVICES), -1 before the backend opened
int cu_device(void);
// stops the program ("CUDA backend: what: the CUDA error string") when e is not cudaSuccess
void cu_check(cudaError_t e, const char *what);
#define CU_CHECK(call) cu_check((call), #call)
// after a kernel launch: cudaGetLastError checked, naming the kernel
#define CU_LAUNCHED(kernel) cu_check(cudaGetLastError(), "launch of " kernel)
// selects the device (index, or -1: the launcher's local rank % the devices visible) and creates the stream;
// its properties into *p. 0, or -1 with the reason in os_errmsg (the CUDA error string: no driver, no device)
int cu_runtime_open(int index, struct cudaDeviceProp *p);
// blocks of `threads` covering n items (n > 0; at least 1)
static inline unsigned cu_blocks(int64_t n, int threads) {
    return n > 0 ? (unsigned)((n + threads - 1) / threads) : 1u;
}
// device scratch from the backend's caching allocator (cu_alloc.c) (not zeroed; the stream-ordered life of a temporary: free
// it after the kernels that use it are issued, the allocator reuses it only for work issued after on cu_stream)
void *cu_scratch(int64_t bytes, const char *what);
void cu_scratch_free(void *p);

#ifdef __cplusplus
}
#endif
