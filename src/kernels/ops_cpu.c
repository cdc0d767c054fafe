// The CPU backend of the device seam (kernels/ops.h): the kernels of kernels.h on host memory. The table is made
// from the seam's list (kernels/ops_list.h): k_<member> for the members whose CPU column is K or KB, cpu_<member>
// below for the others; opened in bf16, k_<member>_prec(1, ...) for the KB members.
#include "kernels/ops.h"
#include "core/alloc.h"
#include "kernels/kernels.h"
#include <pthread.h>
#include <string.h>

static void *cpu_alloc(int64_t bytes, const char *what) { return os_alloc((size_t)bytes, what); }
static void *cpu_alloc_uninit(int64_t bytes, const char *what) { return os_alloc_uninit((size_t)bytes, what); }
static void *cpu_alloc_sparse(int64_t bytes, const char *what) { return os_alloc_lazy((size_t)bytes, what); }
static void cpu_free(void *p) { os_free(p); }
static void cpu_upload(void *dst, const void *src, int64_t bytes) { memcpy(dst, src, (size_t)bytes); }
static void cpu_download(void *dst, const void *src, int64_t bytes) { memcpy(dst, src, (size_t)bytes); }
static void cpu_xent_fwd_bwd(float *logits, int64_t ld, const int32_t *labels, int64_t N, int64_t V, float dscale,
                             double *sum, int64_t *ncorrect) {
    *sum += k_xent_fwd_bwd(logits, ld, labels, N, V, dscale, ncorrect);
}
static void cpu_sumsq(const float *x, int64_t N, double *out) { *out = k_sumsq(x, N); }
static void cpu_first_nonfinite(const float *x, int64_t N, int64_t *out) { *out = k_first_nonfinite(x, N); }

static void cpu_zero(float *x, int64_t n) { memset(x, 0, sizeof(float) * (size_t)n); }
static void cpu_copy(float *dst, const float *src, int64_t n) { memcpy(dst, src, sizeof(float) * (size_t)n); }

#define CPU_FILL(name, R, GUARD, CPU, ...) .name = OS_CAT(OS_CAT(cpu_fill_, CPU)(name), name),
#define cpu_fill_K(name) k_
#define cpu_fill_KB(name) k_
#define cpu_fill_OWN(name) cpu_
const os_ops os_ops_cpu = {
    .name = "cpu",
    .host_memory = 1,
    .bf16 = 0,
    OS_OPS_LIST(CPU_FILL)
};

// ---- bf16 mixed precision: the same table, its products rounding: for every member whose list line's CPU column
// is KB, bf16_<name> runs the kernel's *_prec variant with bf16 1 (a KB member without k_<name>_prec does not
// link) ----
#define CPU_BF16(name, R, GUARD, CPU, ...) OS_CAT(cpu_bf16_, CPU)(name, R, __VA_ARGS__)
#define cpu_bf16_K(...)
#define cpu_bf16_OWN(...)
#define cpu_bf16_KB(name, R, ...)                                                                                     \
    static OS_T(R) bf16_##name(OS_PARAMS(__VA_ARGS__)) { OS_RETURN(R, k_##name##_prec(1, OS_ARGS(__VA_ARGS__))) }
OS_OPS_LIST(CPU_BF16)

#define CPU_FILL_BF16(name, R, GUARD, CPU, ...) OS_CAT(cpu_fill_bf16_, CPU)(name)
#define cpu_fill_bf16_K(name)
#define cpu_fill_bf16_OWN(name)
#define cpu_fill_bf16_KB(name) g_bf16.name = bf16_##name;
static os_ops g_bf16;
static void fill_bf16(void) {
    g_bf16 = os_ops_cpu;
    g_bf16.bf16 = 1;
    OS_OPS_LIST(CPU_FILL_BF16)
}

const os_ops *os_ops_cpu_open(int bf16) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!bf16) return &os_ops_cpu;
    pthread_once(&once, fill_bf16);
    return &g_bf16;
}

const os_ops *os_k = &os_ops_cpu;
