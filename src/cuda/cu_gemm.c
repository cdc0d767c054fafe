// The CUDA backend's product and conversion members (cu_gemm.h): matmul on cuBLASLt (fp32 and bf16), bias and its
// gradient on small kernels (cu_gemm_kernels.cu), cast by the rounding and widening kernels.
#include "cuda/cu_gemm.h"
#include "cuda/cu_alloc.h"
#include "cuda/cu_gemm_kernels.h"
#include "cuda/cu_lt.h"
#include "cuda/cu_ops.h"
#include "cuda/cu_runtime.h"
#include "core/err.h"
#include "kernels/kernels.h"

static int g_tf32, g_bf16;   // set when the backend opens (os_cuda_open): --tf32, --torch_dtype

void cu_gemm_set_bf16(int bf16) { g_bf16 = bf16; }

int cu_gemm_open(int tf32) {
    g_tf32 = tf32;
    return cu_lt_open();
}

// ---- scratch: fp32 operands rounded to bf16, bf16 ones widened, a bf16 result before its rounding ----
static uint16_t *g_scr[2];   // per operand, device, grown only (stream order makes one of each enough)
static int64_t g_scr_cap[2];
static uint16_t *g_f32[3];   // fp32 scratch (as pairs of uint16_t): a and b widened, the result of a bf16 output
static int64_t g_f32_cap[3];

static uint16_t *grow(uint16_t **buf, int64_t *cap, int64_t n, const char *what) {
    if (n > *cap) {
        cu_free(*buf);
        *buf = cu_alloc(2 * n, what), *cap = n;
    }
    return *buf;
}

// operand src [rows, cols] (row stride ld) rounded to bf16 into scratch i (packed: *ldr = cols)
static const uint16_t *rounded(int i, const float *src, int64_t rows, int64_t cols, int64_t ld, int64_t *ldr) {
    *ldr = cols;
    uint16_t *d = grow(&g_scr[i], &g_scr_cap[i], rows * cols, "bf16 GEMM input scratch");
    cu_round_rows(d, src, rows, cols, ld);
    return d;
}

static float *f32_scratch(int i, int64_t n, const char *what) {
    return (float *)grow(&g_f32[i], &g_f32_cap[i], 2 * n, what);
}

// a bf16 operand [rows, cols] (row stride *ld) widened into fp32 scratch i (packed: *ld = cols)
static const float *widened(int i, const void *src, int64_t rows, int64_t cols, int64_t *ld) {
    float *d = f32_scratch(i, rows * cols, "matmul operand widened to fp32");
    cu_widen_rows(d, src, rows, cols, *ld);
    *ld = cols;
    return d;
}

// every row of c [M, N] (row stride ldc) = bias [N]
static void fill_bias(float *c, int64_t ldc, const float *bias, int64_t M, int64_t N) {
    if (ldc == N) cu_fill_rows(c, bias, M, N);
    else
        for (int64_t r = 0; r < M; r++) cu_copy(c + r * ldc, bias, N);
}

// k_matmul's definition (kernels.h) on cuBLASLt: bf16 operands read as they are where both are bf16 or the products
// round (an fp32 one rounded as cu_gemm rounds it), else widened (cuBLASLt multiplies two operands of one type);
// bias by cuBLASLt's bias epilogue (or, where it has no algorithm for it, the rows filled with it first and the product accumulated);
// dbias by cu_bias_grad (an fp32 or a bf16 a); a bf16 c from the fp32 result in scratch, rounded once.
void cu_matmul(os_tensor c, os_tensor a, os_tensor b, float alpha, float beta, os_tensor bias, os_tensor dbias) {
    k_matmul_shape s;
    k_matmul_check(&c, &a, &b, beta, &bias, &dbias, &s);
    int64_t M = s.M, N = s.N, K = s.K, lda = s.lda, ldb = s.ldb, ldc = s.ldc;
    if (dbias.data && M > 0 && K > 0)   // a fp32 or bf16, as the CPU's
        cu_bias_grad(dbias.data, a.data, a.dtype == OS_BF16, M, K, a.stride[0], a.stride[1]);
    if (!c.data || M <= 0 || N <= 0) return;
    float *cf = c.data;
    if (c.dtype == OS_BF16) {
        cf = f32_scratch(2, M * N, "matmul result before its bf16 rounding"), ldc = N;
        if (beta != 0.0f) cu_widen_rows(cf, c.data, M, N, s.ldc);
    }
    if (K <= 0) {
        if (bias.data) fill_bias(cf, ldc, bias.data, M, N);
        else cu_scale_rows(cf, M, N, ldc, beta);
    } else {
        int abf = a.dtype == OS_BF16, bbf = b.dtype == OS_BF16, bf16 = g_bf16 || (abf && bbf);
        const void *pa = a.data, *pb = b.data;
        int64_t ar = s.ta ? K : M, ac = s.ta ? M : K, br = s.tb ? N : K, bc = s.tb ? K : N;
        if (bf16 && !abf) pa = rounded(0, pa, ar, ac, lda, &lda);
        if (bf16 && !bbf) pb = rounded(1, pb, br, bc, ldb, &ldb);
        if (!bf16 && abf) pa = widened(0, pa, ar, ac, &lda);
        if (!bf16 && bbf) pb = widened(1, pb, br, bc, &ldb);
        cu_matmul_op g = {s.ta, s.tb, M, N, K, alpha, beta, pa, pb, lda, ldb, ldc, cf, bf16, g_tf32, bias.data};
        if (cu_lt_matmul(&g) < 0) {   // no fused bias: the rows start from it, the product accumulates
            fill_bias(cf, ldc, bias.data, M, N);
            g.bias = NULL, g.beta = 1.0f;
            cu_lt_matmul(&g);
        }
    }
    if (c.dtype == OS_BF16)
        for (int64_t r = 0; r < M; r++) cu_round_rows((uint16_t *)c.data + r * s.ldc, cf + r * N, 1, N, N);
}

// k_cast's definition (kernels.h): rows rounded (cu_round_rows) or widened (cu_widen_rows), packed destinations in
// one launch, strided ones a row at a time; one dtype copies (a stream-ordered 2-D device copy)
void cu_cast(os_tensor dst, os_tensor src) {
    int64_t r = dst.ndim == 2 ? dst.shape[0] : 1, c = dst.ndim == 2 ? dst.shape[1] : dst.shape[0];
    int64_t ld = dst.ndim == 2 ? dst.stride[0] : c, sld = src.ndim == 2 ? src.stride[0] : c;
    int64_t sr = src.ndim == 2 ? src.shape[0] : 1, sc = src.ndim == 2 ? src.shape[1] : src.shape[0];
    if (dst.ndim < 1 || dst.ndim > 2 || src.ndim < 1 || src.ndim > 2 || r != sr || c != sc ||
        (dst.ndim == 2 ? dst.stride[1] : dst.stride[0]) != 1 || (src.ndim == 2 ? src.stride[1] : src.stride[0]) != 1)
        os_die("cast: dst and src must be vectors or row-major matrices of one shape");
    if (r <= 0 || c <= 0) return;
    int fd = dst.dtype == OS_F32, fs = src.dtype == OS_F32;
    if (fd == fs) {
        size_t e = (size_t)os_dtype_bytes(dst.dtype);
        CU_CHECK(cudaMemcpy2DAsync(dst.data, e * (size_t)ld, src.data, e * (size_t)sld, e * (size_t)c, (size_t)r,
                                   cudaMemcpyDeviceToDevice, cu_stream()));
        return;
    }
    for (int64_t i = 0, n = ld == c ? r : 1; i < r; i += n) {
        void *d = os_tensor_at(dst, i * ld);
        const void *s = os_tensor_at(src, i * sld);
        if (fs) cu_round_rows(d, s, n, c, sld);
        else cu_widen_rows(d, s, n, c, sld);
    }
}
