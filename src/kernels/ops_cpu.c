// The CPU backend of the device seam (kernels/ops.h): the kernels of kernels.h on host memory. The table is made
// from the seam's list (kernels/ops_list.h): k_<member> for the members whose CPU column is K, cpu_<member> below
// for the others.
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
#define cpu_fill_OWN(name) cpu_
const os_ops os_ops_cpu = {
    .name = "cpu",
    .host_memory = 1,
    .bf16 = 0,
    OS_OPS_LIST(CPU_FILL)
};

// ---- bf16 mixed precision: the same table, its products rounding (the kernels' *_prec variants with bf16 1) ----
static void matmul16(os_tensor c, os_tensor a, os_tensor b, float alpha, float beta, os_tensor bias, os_tensor dbias) {
    k_matmul_prec(1, c, a, b, alpha, beta, bias, dbias);
}
static void attention_fwd16(float *out, float *stats, const float *q, const float *k, const float *v,
                            const uint8_t *keymask, const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H,
                            int64_t KH, int64_t D) {
    k_attention_fwd_prec(1, out, stats, q, k, v, keymask, seg, causal, B, T, H, KH, D);
}
static void attention_bwd16(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                            const float *v, const float *out, const float *stats, const uint8_t *keymask,
                            const int32_t *seg, int causal, int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D,
                            int acc) {
    k_attention_bwd_prec(1, dq, dk, dv, dout, q, k, v, out, stats, keymask, seg, causal, B, T, H, KH, D, acc);
}
static void attention_cached_fwd16(float *out, const float *q, const float *kc, const float *vc, int64_t B, int64_t T,
                                   int64_t p0, int64_t S, int64_t H, int64_t KH, int64_t D) {
    k_attention_cached_fwd_prec(1, out, q, kc, vc, B, T, p0, S, H, KH, D);
}
static void conv1d_fwd16(float *out, const float *inp, const float *w, const float *b, int64_t Cin, int64_t Tin,
                         int64_t Cout, int64_t K, int64_t stride, int64_t pad) {
    k_conv1d_fwd_prec(1, out, inp, w, b, Cin, Tin, Cout, K, stride, pad);
}

static os_ops g_bf16;
static void fill_bf16(void) {
    g_bf16 = os_ops_cpu;
    g_bf16.name = "cpu", g_bf16.bf16 = 1, g_bf16.matmul = matmul16, g_bf16.attention_fwd = attention_fwd16, g_bf16.attention_bwd = attention_bwd16;
    g_bf16.attention_cached_fwd = attention_cached_fwd16, g_bf16.conv1d_fwd = conv1d_fwd16;
}

const os_ops *os_ops_cpu_open(int bf16) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!bf16) return &os_ops_cpu;
    pthread_once(&once, fill_bf16);
    return &g_bf16;
}

const os_ops *os_k = &os_ops_cpu;
