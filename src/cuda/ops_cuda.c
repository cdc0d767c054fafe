// The CUDA backend of the device seam (kernels/ops.h): the table os_cuda_open hands to os_k. alloc, free, upload,
// download are here; every other member is cu_<member> (cu_ops.h, declared from the seam's list): the products in
// cu_gemm.c, the kernels in src/cuda/*.cu. A member without its cu_<member> does not link.
#include "cuda/cuda.h"
#include "cuda/cu_alloc.h"
#include "cuda/cu_gemm.h"
#include "cuda/cu_ops.h"
#include "cuda/cu_runtime.h"
#include "core/err.h"
#include <stddef.h>
#include <stdio.h>
#include <string.h>

// zeroed (alloc; alloc_sparse too: device memory has no pages that cost nothing until written) or not
static void *cuda_alloc_uninit(int64_t bytes, const char *what) { return cu_alloc(bytes > 0 ? bytes : 1, what); }
static void *cuda_alloc(int64_t bytes, const char *what) {
    void *p = cuda_alloc_uninit(bytes, what);
    CU_CHECK(cudaMemsetAsync(p, 0, (size_t)(bytes > 0 ? bytes : 1), cu_stream()));
    return p;
}
static void *cuda_alloc_sparse(int64_t bytes, const char *what) { return cuda_alloc(bytes, what); }
static void cuda_free(void *p) { cu_free(p); }

static int stream_done(void *arg) {
    (void)arg;
    cudaError_t e = cudaStreamQuery(cu_stream());
    if (e == cudaErrorNotReady) return 0;
    CU_CHECK(e);
    return 1;
}

// host -> device: from pageable memory the copy is staged before this returns, so src may change after it
static void cuda_upload(void *dst, const void *src, int64_t bytes) {
    if (bytes > 0) CU_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyHostToDevice, cu_stream()));
}

// device -> host, after everything issued before it: the synchronisation point. With NCCL (kernels/devcomm.h) the
// host first polls the stream through comm.c's wait, under the collective watchdog (a peer that never joins a
// collective the stream waits for ends the job at --ddp_timeout instead of blocking here forever), and copies
// after: a copy into pageable memory blocks the host until the stream reaches it, outside any watch
static void cuda_download(void *dst, const void *src, int64_t bytes) {
    if (os_dc_host_wait) os_dc_host_wait(stream_done, NULL);
    if (bytes > 0) CU_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToHost, cu_stream()));
    CU_CHECK(cudaStreamSynchronize(cu_stream()));
}

#define FILL(name, R, GUARD, CPU, ...) FILL_##GUARD(name)
#define FILL_MEM(name) .name = cuda_##name,
#define FILL_ASK(name) .name = cu_##name,
#define FILL_RUN(name) .name = cu_##name,
#define FILL_OWN(name) .name = cu_##name,
static int64_t cuda_held_bytes(void) { return cu_alloc_stats().in_use; }   // the live blocks' size classes

static os_ops g_cuda = {   // bf16 set when opened
    .name = "cuda",
    .host_memory = 0,   // zero/transport.c: NCCL between GPUs (cu_nccl.c), else MPI through host buffers
    .held_bytes = cuda_held_bytes,
    OS_OPS_LIST(FILL)
};
#undef FILL

const os_ops *os_ops_cuda(void) { return &g_cuda; }

int64_t os_cuda_attention_stats_floats(int64_t B, int64_t T, int64_t H) { return cu_attention_stats_floats(B, T, H); }
int os_cuda_built(void) { return 1; }

const os_ops *os_cuda_open(int index, int tf32, int bf16) {
    static int opened;
    g_cuda.bf16 = bf16;
    cu_gemm_set_bf16(bf16), cu_attention_set_bf16(bf16), cu_conv1d_set_bf16(bf16);
    if (opened) return &g_cuda;
    struct cudaDeviceProp p;
    if (cu_runtime_open(index, &p) < 0) return NULL;   // the driver and the device first: the likeliest failure
    if (cu_gemm_open(tf32) < 0) return NULL;
    os_info("device: cuda:%d, %s (compute capability %d.%d, %.1f GB), fp32 products %s", cu_device(), p.name,
            p.major, p.minor, (double)p.totalGlobalMem / 1e9, tf32 ? "in TF32 (--tf32 true)" : "exact (no TF32)");
    opened = 1;
    return &g_cuda;
}

os_cuda_mem os_cuda_mem_stats(void) {
    cu_mem_stats s = cu_alloc_stats();
    return (os_cuda_mem){s.requested, s.peak_requested, s.in_use,          s.peak_in_use,
                         s.reserved,  s.peak_reserved,  s.device_used_peak, s.device_total};
}
