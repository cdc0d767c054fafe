// The CUDA backend of the device seam (kernels/ops.h): the table os_cuda_open hands to os_k. alloc, free, upload,
// download are here, the products in cu_gemm.c; every other member is the kernel cu_<member> of src/cuda/*.cu (cu_ops.h),
// with exactly the member's signature, referenced weakly so that the table builds while kernels are still being
// written: a member whose kernel is not linked stops os_cuda_open with its name, never a fallback to host code.
#include "cuda/cuda.h"
#include "cuda/cu_alloc.h"
#include "cuda/cu_gemm.h"
#include "cuda/cu_ops.h"
#include "cuda/cu_runtime.h"
#include "core/err.h"
#include <stddef.h>
#include <stdio.h>
#include <string.h>

// the members whose kernels live in src/cuda/*.cu as cu_<member>
// (cu_ops.h declares them; the declarations below, of each member's own type, make them weak and fail to compile
// where a kernel's arguments differ from its member's)
#define KERNEL_MEMBERS(X)                                                                                             \
    X(zero) X(copy) X(to_bf16) X(attention_stats_floats) X(attention_fwd) X(attention_bwd) X(attention_cached_fwd)  \
    X(rmsnorm_fwd) X(rmsnorm_bwd) X(layernorm_fwd) X(rope_table) X(rope_fwd) X(rope_bwd) X(embedding_fwd)           \
    X(embedding_acc) X(embedding_bwd) X(swiglu_fwd) X(swiglu_bwd) X(gelu_fwd) X(relu_fwd) X(conv1d_fwd)             \
    X(relu_grad) X(dropout) X(transpose) X(xent_fwd_bwd) X(add) X(axpy) X(scale) X(sumsq) X(first_nonfinite) X(adamw)
#define DECLARE(m) extern __typeof__(*((os_ops *)0)->m) cu_##m __attribute__((weak));
KERNEL_MEMBERS(DECLARE)
#undef DECLARE

// zeroed (alloc; alloc_sparse too: device memory has no pages that cost nothing until written) or not
static void *alloc_uninit(int64_t bytes, const char *what) { return cu_alloc(bytes > 0 ? bytes : 1, what); }
static void *alloc(int64_t bytes, const char *what) {
    void *p = alloc_uninit(bytes, what);
    CU_CHECK(cudaMemsetAsync(p, 0, (size_t)(bytes > 0 ? bytes : 1), cu_stream()));
    return p;
}

static int stream_done(void *arg) {
    (void)arg;
    cudaError_t e = cudaStreamQuery(cu_stream());
    if (e == cudaErrorNotReady) return 0;
    CU_CHECK(e);
    return 1;
}

// host -> device: from pageable memory the copy is staged before this returns, so src may change after it
static void upload(void *dst, const void *src, int64_t bytes) {
    if (bytes > 0) CU_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyHostToDevice, cu_stream()));
}

// device -> host, after everything issued before it: the synchronisation point. With NCCL (kernels/devcomm.h) the
// host first polls the stream through zero/coll_nccl.c's wait, under the collective watchdog (a peer that never joins a
// collective the stream waits for ends the job at --ddp_timeout instead of blocking here forever), and copies
// after: a copy into pageable memory blocks the host until the stream reaches it, outside any watch
static void download(void *dst, const void *src, int64_t bytes) {
    if (os_dc_host_wait) os_dc_host_wait(stream_done, NULL);
    if (bytes > 0) CU_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToHost, cu_stream()));
    CU_CHECK(cudaStreamSynchronize(cu_stream()));
}

#define FILL(m) .m = cu_##m,
static os_ops g_cuda = {
    .name = "cuda",
    .alloc = alloc,
    .alloc_uninit = alloc_uninit,
    .alloc_sparse = alloc,
    .free = cu_free,
    .host_memory = 0,   // zero/transport.c: NCCL between GPUs (cu_nccl.c), else MPI through host buffers
    .upload = upload,
    .download = download,
    .gemm = cu_gemm,
    .gemm_pin = cu_gemm_pin,
    .gemm_unpin = cu_gemm_unpin,
    .gemm_bound_esz = cu_gemm_bound_esz,
    .gemm_widen = cu_gemm_widen,
    .gemm_bind = cu_gemm_bind,
    .gemm_unbind = cu_gemm_unbind,
    .gemm_rounds = cu_gemm_rounds,
    .gemm_round = cu_gemm_round,
    .gemm_rounded = cu_gemm_rounded,
    .matmul = cu_matmul,
    .linear_fwd = cu_linear_fwd,
    .linear_bwd = cu_linear_bwd,
    KERNEL_MEMBERS(FILL)
};
#undef FILL

// every member of os_ops is in this file's lists (a member added to ops.h and not filled here does not compile)
#define OWN_MEMBERS(X)                                                                                                \
    X(alloc) X(alloc_uninit) X(alloc_sparse) X(free) X(upload) X(download) X(gemm) X(gemm_pin) X(gemm_unpin)         \
    X(gemm_bound_esz) X(gemm_widen) X(gemm_bind) X(gemm_unbind) X(gemm_rounds) X(gemm_round) X(gemm_rounded)        \
    X(matmul) X(linear_fwd) X(linear_bwd)
#define FIELD(m) __typeof__(((os_ops *)0)->m) m;
struct listed {
    const char *name;
    int host_memory, bf16;
    OWN_MEMBERS(FIELD) KERNEL_MEMBERS(FIELD)
};
#undef FIELD
_Static_assert(sizeof(struct listed) == sizeof(os_ops), "os_ops has a member src/cuda/ops_cuda.c does not list");

int cu_ops_missing(char *buf, size_t n) {
    size_t k = 0;
    int missing = 0;
    buf[0] = 0;
#define CHECK(m)                                                                                                      \
    if (!g_cuda.m && k < n) k += (size_t)snprintf(buf + k, n - k, "%s%s", missing++ ? ", " : "", #m);
    KERNEL_MEMBERS(CHECK)
#undef CHECK
    return missing;
}

const os_ops *os_ops_cuda(void) { return &g_cuda; }

int64_t os_cuda_attention_stats_floats(int64_t B, int64_t T, int64_t H) {
    if (!cu_attention_stats_floats) os_die("CUDA backend: attention_stats_floats not built yet");
    return cu_attention_stats_floats(B, T, H);
}
int os_cuda_built(void) { return 1; }

const os_ops *os_cuda_open(int index, int tf32, int bf16) {
    static int opened;
    g_cuda.bf16 = bf16;
    cu_gemm_set_bf16(bf16), cu_attention_set_bf16(bf16);
    if (opened) return &g_cuda;
    struct cudaDeviceProp p;
    if (cu_runtime_open(index, &p) < 0) return NULL;   // the driver and the device first: the likeliest failure
    char missing[1024];
    if (cu_ops_missing(missing, sizeof missing)) {
        os_errf("CUDA backend: %s not built yet (no kernel cu_<member> linked from src/cuda/*.cu)", missing);
        return NULL;
    }
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
