// The CUDA backend's product members (cu_gemm.h): fp32 and bf16 products on cuBLASLt, bias and its gradient on
// small kernels (cu_gemm_kernels.cu), the bf16 operands' rounded copies found as the CPU's gemm_bf16.c finds them.
#include "cuda/cu_gemm.h"
#include "cuda/cu_alloc.h"
#include "cuda/cu_gemm_kernels.h"
#include "cuda/cu_lt.h"
#include "cuda/cu_ops.h"
#include "cuda/cu_runtime.h"
#include "core/err.h"
#include "kernels/gemm_binds.h"
#include "kernels/kernels.h"

static int g_tf32, g_bf16;   // set when the backend opens (os_cuda_open): --tf32, --torch_dtype

void cu_gemm_set_bf16(int bf16) { g_bf16 = bf16; }

int cu_gemm_open(int tf32) {
    g_tf32 = tf32;
    return cu_lt_open();
}

// ---- rounded copies: bound ranges (the runtime's), the pinned weight, scratch ----
static k_binds g_binds;   // (kernels/gemm_binds.h)
static struct {
    const float *src;   // NULL: none pinned
    int64_t rows, cols, ld;
    uint16_t *copy;     // device, kept between pins (grown only)
    int64_t cap;        // elements
} g_pin;
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

void cu_gemm_bind(const float *w, int64_t n, const void *rounded) { k_binds_set(&g_binds, w, n, rounded); }
void cu_gemm_unbind(const float *w) { k_binds_drop(&g_binds, w); }

int64_t cu_gemm_bound_esz(void) { return 2; }
void cu_gemm_widen(void *buf, int64_t n) { (void)buf, (void)n; }   // bf16 bits are the products' format
int64_t cu_gemm_rounds(void) { return g_bf16 ? 2 : 0; }

void cu_gemm_round(void *dst, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    if (rows > 0 && cols > 0) cu_round_rows(dst, src, rows, cols, ld);
}

void cu_gemm_pin(const float *w, int64_t rows, int64_t cols, int64_t ld) {
    if (!g_bf16 || rows <= 0 || cols <= 0) return;
    if (k_binds_find(&g_binds, w, rows, cols, ld, 2)) return;   // rounded ahead already
    cu_round_rows(grow(&g_pin.copy, &g_pin.cap, rows * cols, "bf16 rounded weight"), w, rows, cols, ld);
    g_pin.src = w, g_pin.rows = rows, g_pin.cols = cols, g_pin.ld = ld;
}

void cu_gemm_unpin(void) { g_pin.src = NULL; }

// operand src [rows, cols] (row stride ld) as bf16: the bound copy (stride ld), the pinned copy (stride: the
// pinned columns) or scratch i rounded now (packed); its stride into *ldr
static const uint16_t *rounded(int i, const float *src, int64_t rows, int64_t cols, int64_t ld, int64_t *ldr) {
    *ldr = ld;
    const uint16_t *b = k_binds_find(&g_binds, src, rows, cols, ld, 2);
    if (b) return b;
    if (g_pin.src && ld == g_pin.ld && src >= g_pin.src) {   // the pinned operand or a block of it
        int64_t off = src - g_pin.src, r = off / ld, c = off % ld;
        if (r + rows <= g_pin.rows && c + cols <= g_pin.cols) {
            *ldr = g_pin.cols;
            return g_pin.copy + r * g_pin.cols + c;
        }
    }
    *ldr = cols;
    uint16_t *d = grow(&g_scr[i], &g_scr_cap[i], rows * cols, "bf16 GEMM input scratch");
    cu_round_rows(d, src, rows, cols, ld);
    return d;
}

// the product with a and b as given (pre bit 0: a is bf16 bits already, bit 1: b) or, in bf16, rounded
static void product(int pre, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *a,
                    int64_t lda, const void *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {   // op(a) @ op(b) is all zeros: c = beta * c (beta 0 overwrites, as BLAS does)
        cu_scale_rows(c, M, N, ldc, beta);
        return;
    }
    int bf16 = g_bf16;
    cu_matmul_op g = {ta, tb, M, N, K, alpha, beta, a, b, lda, ldb, ldc, c, bf16, g_tf32, NULL};
    if (bf16 && !(pre & 1)) g.a = rounded(0, a, ta ? K : M, ta ? M : K, lda, &g.lda);
    if (bf16 && !(pre & 2)) g.b = rounded(1, b, tb ? N : K, tb ? K : N, ldb, &g.ldb);
    cu_lt_matmul(&g);
}

void cu_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *a, int64_t lda,
             const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    product(0, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

void cu_gemm_rounded(int pre, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *a,
                     int64_t lda, const void *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    OS_ASSERT(g_bf16 && K > 0);
    product(pre, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
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
// bias by cuBLASLt's bias epilogue (or, where it has no algorithm for it, rows filled first as cu_linear_fwd);
// dbias by cu_bias_grad; a bf16 c from the fp32 result in scratch, rounded once.
void cu_matmul(os_tensor c, os_tensor a, os_tensor b, float alpha, float beta, os_tensor bias, os_tensor dbias) {
    k_matmul_shape s;
    k_matmul_check(&c, &a, &b, beta, &bias, &dbias, &s);
    int64_t M = s.M, N = s.N, K = s.K, lda = s.lda, ldb = s.ldb, ldc = s.ldc;
    if (dbias.data && M > 0) {
        if (a.dtype != OS_F32) os_die("CUDA backend: matmul's dbias reads an fp32 a only (a is bf16)");
        if (K > 0) cu_bias_grad(dbias.data, a.data, M, K, a.stride[0], a.stride[1]);
    }
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

// out[N,O] = inp[N,I] @ w[O,I]^T + bias[O]
void cu_linear_fwd(float *out, const float *inp, const float *w, const float *bias, int64_t N, int64_t I, int64_t O) {
    if (N <= 0 || O <= 0) return;
    if (bias) cu_fill_rows(out, bias, N, O);
    cu_gemm(0, 1, N, O, I, 1.0f, inp, I, w, I, bias ? 1.0f : 0.0f, out, O);
}

// dinp[N,I] += dout[N,O] @ w[O,I];  dw[O,I] += dout^T @ inp;  dbias[O] += column sums of dout (in double)
void cu_linear_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                   int64_t N, int64_t I, int64_t O) {
    if (dinp) cu_gemm(0, 0, N, I, O, 1.0f, dout, O, w, I, 1.0f, dinp, I);
    if (dw) cu_gemm(1, 0, O, I, N, 1.0f, dout, O, inp, I, 1.0f, dw, I);
    if (dbias && N > 0 && O > 0) cu_bias_grad(dbias, dout, O, N, 1, O);
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
