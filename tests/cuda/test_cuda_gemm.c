// The CUDA backend's products (src/cuda/cu_gemm.c on cuBLASLt) against their definition, on a GPU: every element
// of c equals alpha * sum_k op(a)[m,k] * op(b)[k,n] + beta * c (the sum in double here; bf16: both operands rounded
// to nearest even first) within the fp32 accumulation bound (K + 2) * 2^-23 * (|alpha| sum_k |products| + |beta c|),
// TF32 within 2^-10 of the products' magnitude more. Odd shapes, both transposes, strided operands (c's padding
// must stay), K = 0, alpha/beta, all through cu_matmul's views; bf16 with operands given as their bf16 copies (cast,
// as the runtime's weights and the head's stash); a linear layer's forward with bias and backward with its double
// column sums (matmul's bias and dbias options) against the CPU's k_linear_*.
// Without a GPU it says why and passes (make CUDA=1 builds it; tests/test_device_flag.py runs it).
#include "cuda/cu_alloc.h"
#include "cuda/cu_gemm.h"
#include "cuda/cu_runtime.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "../unit/check.h"
#include <math.h>
#include <string.h>

static double bf16(float f) {   // written from the definition: keep 8 significant bits, ties to even
    if (f == 0.0f || isinf(f) || isnan(f)) return f;
    int e;
    double m = frexp((double)f, &e);
    return ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

static float *up(const float *h, int64_t n) {
    float *d = cu_alloc(4 * (n > 0 ? n : 1), "test operand");
    CU_CHECK(cudaMemcpy(d, h, 4 * (size_t)n, cudaMemcpyHostToDevice));
    return d;
}
// (cudaMemcpy does not wait for a non-blocking stream: the backend's work is waited for first)
static void down(float *h, const float *d, int64_t n) {
    CU_CHECK(cudaStreamSynchronize(cu_stream()));
    CU_CHECK(cudaMemcpy(h, d, 4 * (size_t)n, cudaMemcpyDeviceToHost));
}

enum { PLAIN, A_BF16, B_BF16, AB_BF16 };   // bit 0: a given as its bf16 copy, bit 1: b
static const char *how_name[] = {"plain", "a bf16", "b bf16", "a,b bf16"};

// a stored [rows, cols] (row stride ld) as the product's operand: op(x) (t: its transpose)
static os_tensor operand(const void *d, os_dtype dt, int t, int64_t rows, int64_t cols, int64_t ld) {
    os_tensor v = os_mat(d, dt, rows, cols, ld);
    return t ? os_tensor_t(v) : v;
}

// one product on the GPU, c checked against the definition; mode: 0 fp32, 1 bf16, 2 tf32 (opened with tf32)
static void product(int mode, int how, int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t pad, float alpha,
                    float beta, uint64_t seed) {
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int64_t lda = ac + pad, ldb = bc + pad, ldc = N + pad, na = ar * lda, nb = br * ldb, nc = M * ldc;
    float *a = os_alloc(4 * (size_t)(na + 1), "a"), *b = os_alloc(4 * (size_t)(nb + 1), "b");
    float *c0 = os_alloc(4 * (size_t)nc, "c0"), *c = os_alloc(4 * (size_t)nc, "c");
    os_rng_fill_uniform(a, na, seed, 0, -1, 1), os_rng_fill_uniform(b, nb, seed + 1, 0, -1, 1);
    os_rng_fill_uniform(c0, nc, seed + 2, 0, -1, 1);
    float *da = up(a, na), *db = up(b, nb), *dc = up(c0, nc);
    uint16_t *ra = cu_alloc(2 * (na + 1), "a rounded"), *rb = cu_alloc(2 * (nb + 1), "b rounded");
    cu_gemm_set_bf16(mode == 1);
    if (na > 0) cu_cast(os_vec(ra, OS_BF16, na), os_vecf(da, na));   // the copies: whole buffers, same offsets
    if (nb > 0) cu_cast(os_vec(rb, OS_BF16, nb), os_vecf(db, nb));
    os_tensor va = how & 1 ? operand(ra, OS_BF16, ta, ar, ac, lda) : operand(da, OS_F32, ta, ar, ac, lda);
    os_tensor vb = how & 2 ? operand(rb, OS_BF16, tb, br, bc, ldb) : operand(db, OS_F32, tb, br, bc, ldb);
    cu_matmul(os_matf(dc, M, N, ldc), va, vb, alpha, beta, os_tensor_none(), os_tensor_none());
    cu_gemm_set_bf16(0);
    down(c, dc, nc);
    double worst = 0;
    int pads = 1;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t n = 0; n < N; n++) {
            double s = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                float fx = ta ? a[k * lda + m] : a[m * lda + k], fy = tb ? b[n * ldb + k] : b[k * ldb + n];
                double x = mode == 1 ? bf16(fx) : fx, y = mode == 1 ? bf16(fy) : fy;
                s += x * y, mag += fabs(x * y);
            }
            double c_in = beta == 0.0f ? 0.0 : beta * (double)c0[m * ldc + n];
            double want = alpha * s + c_in;
            double rel = (double)(K + 2) * ldexp(1.0, -23) + (mode == 2 ? ldexp(1.0, -10) : 0.0);
            double bound = rel * (fabs(alpha) * mag + fabs(c_in)) + 1e-30;
            double err = fabs(c[m * ldc + n] - want) / bound;
            worst = err > worst ? err : worst;
        }
        for (int64_t n = N; n < ldc; n++) pads &= c[m * ldc + n] == c0[m * ldc + n];
    }
    CHECK(worst <= 1.0, "%s %s %c%c %lldx%lldx%lld pad %lld alpha %g beta %g: error %.3g of the bound",
          mode == 1 ? "bf16" : mode == 2 ? "tf32" : "fp32", how_name[how], ta ? 'T' : 'N', tb ? 'T' : 'N',
          (long long)M, (long long)N, (long long)K, (long long)pad, alpha, beta, worst);
    CHECK(pads, "%s: c's padding changed", how_name[how]);
    cu_free(da), cu_free(db), cu_free(dc), cu_free(ra), cu_free(rb);
    os_free(a), os_free(b), os_free(c0), os_free(c);
}

static double max_rel(const float *x, const float *y, int64_t n) {
    double w = 0, s = 0;
    for (int64_t i = 0; i < n; i++) w = fmax(w, fabs((double)x[i] - y[i])), s = fmax(s, fabs((double)y[i]));
    return w / (s + 1e-30);
}

// a linear layer's forward (matmul with its bias) and backward (dinp, dw with dbias, accumulated) against the CPU's
static void linear(int64_t N, int64_t I, int64_t O) {
    int64_t nw = O * I, ni = N * I, no = N * O;
    float *w = os_alloc(4 * (size_t)nw, "w"), *x = os_alloc(4 * (size_t)ni, "x"), *bias = os_alloc(4 * (size_t)O, "b");
    float *g = os_alloc(4 * (size_t)no, "dout"), *out = os_alloc(4 * (size_t)no, "out"), *o2 = os_alloc(4 * (size_t)no, "o2");
    float *dx = os_alloc(4 * (size_t)ni, "dx"), *dw = os_alloc(4 * (size_t)nw, "dw"), *db = os_alloc(4 * (size_t)O, "db");
    float *dx2 = os_alloc(4 * (size_t)ni, "dx2"), *dw2 = os_alloc(4 * (size_t)nw, "dw2"), *db2 = os_alloc(4 * (size_t)O, "db2");
    os_rng_fill_uniform(w, nw, 11, 0, -1, 1), os_rng_fill_uniform(x, ni, 12, 0, -1, 1);
    os_rng_fill_uniform(bias, O, 13, 0, -1, 1), os_rng_fill_uniform(g, no, 14, 0, -1, 1);
    os_rng_fill_uniform(dx, ni, 15, 0, -1, 1), os_rng_fill_uniform(dw, nw, 16, 0, -1, 1);
    os_rng_fill_uniform(db, O, 17, 0, -1, 1);
    float *dW = up(w, nw), *dX = up(x, ni), *dB = up(bias, O), *dG = up(g, no), *dO = cu_alloc(4 * no, "out");
    float *dDX = up(dx, ni), *dDW = up(dw, nw), *dDB = up(db, O);
    memcpy(dx2, dx, 4 * (size_t)ni), memcpy(dw2, dw, 4 * (size_t)nw), memcpy(db2, db, 4 * (size_t)O);
    k_linear_fwd(out, x, w, bias, N, I, O);
    k_linear_bwd(dx, dw, db, g, x, w, N, I, O);
    os_tensor vw = os_matf(dW, O, I, I), vg = os_matf(dG, N, O, O), none = os_tensor_none();
    cu_matmul(os_matf(dO, N, O, O), os_matf(dX, N, I, I), os_tensor_t(vw), 1.0f, 0.0f, os_vecf(dB, O), none);
    cu_matmul(os_matf(dDX, N, I, I), vg, vw, 1.0f, 1.0f, none, none);
    cu_matmul(os_matf(dDW, O, I, I), os_tensor_t(vg), os_matf(dX, N, I, I), 1.0f, 1.0f, none, os_vecf(dDB, O));
    down(o2, dO, no), down(dx2, dDX, ni), down(dw2, dDW, nw), down(db2, dDB, O);
    double e[4] = {max_rel(o2, out, no), max_rel(dx2, dx, ni), max_rel(dw2, dw, nw), max_rel(db2, db, O)};
    for (int i = 0; i < 4; i++)
        CHECK(e[i] <= 1e-5, "linear %lldx%lldx%lld: %s differs from the CPU's by %.3g (relative to its largest)",
              (long long)N, (long long)I, (long long)O, (const char *[]){"out", "dinp", "dw", "dbias"}[i], e[i]);
    cu_free(dW), cu_free(dX), cu_free(dB), cu_free(dG), cu_free(dO), cu_free(dDX), cu_free(dDW), cu_free(dDB);
    os_free(w), os_free(x), os_free(bias), os_free(g), os_free(out), os_free(o2), os_free(dx), os_free(dw);
    os_free(db), os_free(dx2), os_free(dw2), os_free(db2);
}

int main(void) {
    struct cudaDeviceProp p;
    if (cu_runtime_open(-1, &p) < 0) {
        printf("test_cuda_gemm: skipped, no GPU: %s\n", os_errmsg());
        return 0;
    }
    if (cu_gemm_open(0) < 0) return fprintf(stderr, "FAIL: %s\n", os_errmsg()), 1;
    printf("test_cuda_gemm on %s\n", p.name);
    const int64_t shapes[][3] = {{1, 1, 1}, {1, 7, 13}, {7, 1, 5}, {7, 13, 5}, {33, 17, 64}, {64, 1000, 7},
                                 {128, 96, 896}, {3, 257, 1000}};
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int mode = 0; mode < 2; mode++) {
                const int64_t *d = shapes[s];
                product(mode, PLAIN, t & 1, t >> 1, d[0], d[1], d[2], s % 3, 1.0f, 0.0f, seed++);
                product(mode, PLAIN, t & 1, t >> 1, d[0], d[1], d[2], 3, -0.5f, 0.75f, seed++);
            }
    for (int how = A_BF16; how <= AB_BF16; how++)
        for (int t = 0; t < 4; t++) product(1, how, t & 1, t >> 1, 37, 29, 96, 2, 1.0f, 1.0f, seed++);
    product(0, PLAIN, 0, 0, 5, 6, 0, 1, 1.0f, 0.5f, seed++);   // K = 0: c = beta c (b [0, 6]: a view matmul reads)
    product(0, PLAIN, 0, 0, 5, 6, 0, 1, 1.0f, 0.0f, seed++);   // K = 0, beta 0: zeros
    linear(7, 13, 5), linear(64, 896, 128), linear(1, 100, 3);
    cu_gemm_open(1);   // --tf32 true
    for (int t = 0; t < 4; t++) product(2, PLAIN, t & 1, t >> 1, 64, 96, 896, 1, 1.0f, 1.0f, seed++);
    CU_CHECK(cudaStreamSynchronize(cu_stream()));
    return check_report("test_cuda_gemm");
}
