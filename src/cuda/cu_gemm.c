// The CUDA backend's product members (cu_gemm.h): fp32 and bf16 products on cuBLASLt, bias and its gradient on
// small kernels (cu_gemm_kernels.cu), the bf16 operands' rounded copies found as the CPU's gemm_bf16.c finds them.
#include "cuda/cu_gemm.h"
#include "cuda/cu_alloc.h"
#include "cuda/cu_gemm_kernels.h"
#include "cuda/cu_lt.h"
#include "core/err.h"
#include "kernels/gemm_binds.h"
#include "kernels/kernels.h"

static int g_tf32;

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
int64_t cu_gemm_rounds(void) { return k_gemm_bf16_on() ? 2 : 0; }

void cu_gemm_round(void *dst, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    if (rows > 0 && cols > 0) cu_round_rows(dst, src, rows, cols, ld);
}

void cu_gemm_pin(const float *w, int64_t rows, int64_t cols, int64_t ld) {
    if (!k_gemm_bf16_on() || rows <= 0 || cols <= 0) return;
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
    int bf16 = k_gemm_bf16_on();
    cu_matmul_op g = {ta, tb, M, N, K, alpha, beta, a, b, lda, ldb, ldc, c, bf16, g_tf32};
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
    OS_ASSERT(k_gemm_bf16_on() && K > 0);
    product(pre, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
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
    if (dbias && N > 0 && O > 0) cu_colsum_add(dbias, dout, N, O);
}
