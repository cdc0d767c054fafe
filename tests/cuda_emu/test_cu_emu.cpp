// The CUDA kernels of src/cuda/ (every cu_<member> of cuda/cu_ops.h) run on the CPU through the stand-in runtime
// tests/cuda_emu/cuda_runtime.h, against the CPU kernel of the same op, within the tolerance docs/design.md "CUDA
// kernels" gives it. Shapes are small and odd (T = 1, 7, 70 across the 32-row tiles; vocabulary 1001; GQA 14/2;
// head dims 8, 64 and 100; chunks of rows above the 256 blocks). This proves the kernels' indexing, masks,
// reductions and barriers on the CPU; their float arithmetic on a GPU (libdevice, fma) is tools/device-check.sh's.
#include "cuda_runtime.h"
#include "../unit/check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>
extern "C" {
#include "cuda/cu_ops.h"
#include "cuda/cu_gemm_kernels.h"
#include "core/ids.h"
#include "kernels/kernels.h"
}

// ---- the backend runtime the kernels call (src/cuda/cu_runtime.h), on host memory ----
extern "C" cudaStream_t cu_stream(void) { return nullptr; }
extern "C" int cu_device(void) { return 0; }
extern "C" void cu_check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "CUDA backend: %s: error %d\n", what, e);
        exit(1);
    }
}
extern "C" void *cu_scratch(int64_t bytes, const char *) { return malloc((size_t)(bytes > 0 ? bytes : 1)); }
extern "C" void cu_scratch_free(void *p) { free(p); }

typedef std::vector<float> vec;
static vec rnd(int64_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
    vec v((size_t)n);
    for (auto &x : v) {
        seed = seed * 1103515245u + 12345u;
        x = lo + (hi - lo) * (float)((seed >> 8) & 0xffff) / 65536.0f;
    }
    return v;
}
static bool same(const vec &a, const vec &b) { return a.size() == b.size() && !memcmp(a.data(), b.data(), 4 * a.size()); }
// max |a - b| / (atol + rtol |b|) <= 1
static bool close(const vec &a, const vec &b, double atol, double rtol, const char *what) {
    double worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < a.size(); i++) {
        double e = fabs((double)a[i] - b[i]) / (atol + rtol * fabs((double)b[i]));
        if (!(e <= worst)) worst = e, at = i;
    }
    if (worst > 1.0) fprintf(stderr, "%s: element %zu: %.9g against the CPU's %.9g\n", what, at, a[at], b[at]);
    return worst <= 1.0;
}

// ---- the emulator's mma.sync / ldmatrix against the PTX ISA's fragment layouts (../shared tensor-cores.md) ----
// hand-worked lanes of the document: lane 0, 5 and 31 (g = lane / 4, t = lane % 4)
static void test_fragment_table(void) {
    static const int a0[8][2] = {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}};
    static const int a5[8][2] = {{1, 2}, {1, 3}, {9, 2}, {9, 3}, {1, 10}, {1, 11}, {9, 10}, {9, 11}};
    static const int a31[8][2] = {{7, 6}, {7, 7}, {15, 6}, {15, 7}, {7, 14}, {7, 15}, {15, 14}, {15, 15}};
    static const int b5[4][2] = {{2, 1}, {3, 1}, {10, 1}, {11, 1}}, b31[4][2] = {{6, 7}, {7, 7}, {14, 7}, {15, 7}};
    static const int c0[4][2] = {{0, 0}, {0, 1}, {8, 0}, {8, 1}}, c5[4][2] = {{1, 2}, {1, 3}, {9, 2}, {9, 3}};
    for (int i = 0; i < 8; i++) {
        CHECK(cu_frag_a_row(0, i) == a0[i][0] && cu_frag_a_col(0, i) == a0[i][1], "lane 0 a%d", i);
        CHECK(cu_frag_a_row(5, i) == a5[i][0] && cu_frag_a_col(5, i) == a5[i][1], "lane 5 a%d", i);
        CHECK(cu_frag_a_row(31, i) == a31[i][0] && cu_frag_a_col(31, i) == a31[i][1], "lane 31 a%d", i);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(cu_frag_b_row(5, i) == b5[i][0] && cu_frag_b_col(5, i) == b5[i][1], "lane 5 b%d", i);
        CHECK(cu_frag_b_row(31, i) == b31[i][0] && cu_frag_b_col(31, i) == b31[i][1], "lane 31 b%d", i);
        CHECK(cu_frag_c_row(0, i) == c0[i][0] && cu_frag_c_col(0, i) == c0[i][1], "lane 0 c%d", i);
        CHECK(cu_frag_c_row(5, i) == c5[i][0] && cu_frag_c_col(5, i) == c5[i][1], "lane 5 c%d", i);
    }
    // ldmatrix: lane 5 holds row 1, elements 2 and 3; transposed, rows 2 and 3 of column 1
    CHECK(cu_frag_ldm_row(5, 0, 0) == 1 && cu_frag_ldm_col(5, 0, 0) == 2 && cu_frag_ldm_col(5, 1, 0) == 3, "ldmatrix lane 5");
    CHECK(cu_frag_ldm_row(5, 1, 1) == 3 && cu_frag_ldm_col(5, 1, 1) == 1, "ldmatrix.trans lane 5");
    CHECK(cu_frag_ldm_addr_lane(2, 7) == 23, "ldmatrix: matrix 2's row 7 comes from lane 23");
}

static uint16_t bf16_of(float f) { return (uint16_t)(cu_pack_bf16(f, 0.0f) & 0xffffu); }
static float float_of(uint16_t h) { return cu_emu::bf16_value(h, 0); }

// one warp: M[4] 8x8 bf16 matrices (row stride 8) loaded by every ldmatrix form; regs[form][lane][4]
static void ldm_kernel(const uint16_t *M, uint32_t *regs) {
    static uint16_t sm[4 * 64];
    int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32) sm[i] = M[i];
    __syncwarp();
    const uint16_t *row = sm + 64 * (lane / 8) + 8 * (lane % 8);   // lane 8j + r: row r of matrix j
    uint32_t r4[4], r2[2], r1[1], *o = regs + 4 * lane;
    cu_ldmatrix_x4(r4, row), memcpy(o, r4, 16), o += 128;
    cu_ldmatrix_x4_trans(r4, row), memcpy(o, r4, 16), o += 128;
    cu_ldmatrix_x2(r2, row), memcpy(o, r2, 8), o += 128;
    cu_ldmatrix_x2_trans(r2, row), memcpy(o, r2, 8), o += 128;
    cu_ldmatrix_x1(r1, row), memcpy(o, r1, 4), o += 128;
    cu_ldmatrix_x1_trans(r1, row), memcpy(o, r1, 4);
}

// one warp: A[16][16] (row-major) and B as Bt[8][16] (n rows of k: the .col operand) through ldmatrix into
// fragments, then D = A B + C; every lane's registers and results to frags/d
static void mma_kernel(const uint16_t *A, const uint16_t *Bt, const float *C, uint32_t *frags, float *d) {
    static uint16_t sa[256], sb[128];
    int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32) sa[i] = A[i];
    for (int i = lane; i < 128; i += 32) sb[i] = Bt[i];
    __syncwarp();
    // A: matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) = a0..a7 (tensor-cores.md)
    uint32_t a[4], b[2];
    cu_ldmatrix_x4(a, sa + 16 * (lane % 8 + 8 * (lane / 8 % 2)) + 8 * (lane / 16));
    // B: matrices (n 0-7, k 0-7), (n 0-7, k 8-15) of Bt = b0..b3
    cu_ldmatrix_x2(b, sb + 16 * (lane % 8) + 8 * (lane / 8 % 2));
    memcpy(frags + 6 * lane, a, 16), memcpy(frags + 6 * lane + 4, b, 8);
    float acc[4];
    memcpy(acc, C + 4 * lane, 16);
    cu_mma_bf16(acc, a, b);
    memcpy(d + 4 * lane, acc, 16);
}

static void test_mma_ldmatrix(void) {
    // ldmatrix: lane l, register j = matrix j's row l/4, elements 2(l%4) and 2(l%4)+1 (low half first); .trans:
    // the same of the transpose (written out here from the document, not from cu_mma_frag.h)
    std::vector<uint16_t> M(256);
    for (int i = 0; i < 256; i++) M[i] = (uint16_t)(0x3f80 + i);   // distinct bf16 values
    std::vector<uint32_t> regs(6 * 128, 0xdeadbeefu);
    cu_emu::launch(ldm_kernel, dim3(1), dim3(32))(M.data(), regs.data());
    int nums[6] = {4, 4, 2, 2, 1, 1};
    for (int f = 0; f < 6; f++)
        for (int l = 0; l < 32; l++)
            for (int j = 0; j < nums[f]; j++)
                for (int e = 0; e < 2; e++) {
                    int r = l / 4, c = 2 * (l % 4) + e, trans = f % 2;
                    uint16_t want = M[64 * j + (trans ? 8 * c + r : 8 * r + c)];
                    uint16_t got = (uint16_t)(regs[128 * f + 4 * l + j] >> (16 * e));
                    CHECK(got == want, "ldmatrix form %d lane %d register %d element %d: %#x, want %#x", f, l, j, e, got, want);
                }
    // mma: every lane's fragments (from ldmatrix) and its four results against the plain product
    std::vector<uint16_t> A(256), Bt(128);
    vec av = rnd(256, 90), bv = rnd(128, 91), C = rnd(128, 92), D(128);
    for (int i = 0; i < 256; i++) A[i] = bf16_of(av[i]);
    for (int i = 0; i < 128; i++) Bt[i] = bf16_of(bv[i]);
    std::vector<uint32_t> frags(6 * 32);
    cu_emu::launch(mma_kernel, dim3(1), dim3(32))(A.data(), Bt.data(), C.data(), frags.data(), D.data());
    for (int l = 0; l < 32; l++) {
        int g = l / 4, t = l % 4;
        for (int i = 0; i < 8; i++) {   // a_i at row g (+8 for a2,a3,a6,a7), column 2t + (i & 1) (+8 for i >= 4)
            int row = g + (i % 4 >= 2 ? 8 : 0), col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
            CHECK((uint16_t)(frags[6 * l + i / 2] >> (16 * (i & 1))) == A[16 * row + col], "lane %d a%d", l, i);
        }
        for (int i = 0; i < 4; i++) {   // b_i at k = 2t + (i & 1) (+8 for b2,b3), n = g
            int k = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
            CHECK((uint16_t)(frags[6 * l + 4 + i / 2] >> (16 * (i & 1))) == Bt[16 * g + k], "lane %d b%d", l, i);
        }
        for (int i = 0; i < 4; i++) {   // d_i at row g (+8 for d2,d3), column 2t + (i & 1)
            int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
            double want = C[4 * l + i], mag = fabs(want);
            for (int k = 0; k < 16; k++) {
                double p = (double)float_of(A[16 * row + k]) * float_of(Bt[16 * col + k]);
                want += p, mag += fabs(p);
            }
            CHECK(fabs(D[4 * l + i] - want) <= 17 * 0x1p-24 * mag, "lane %d d%d = D[%d][%d]: %.9g, want %.9g", l, i,
                  row, col, D[4 * l + i], want);
        }
    }
}

// a warp whose lanes reach different collective instructions (half at mma.sync, half at ldmatrix) stops the run
static void diverged_kernel(void) {
    static uint16_t sm[256];
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float d[4] = {0, 0, 0, 0};
    if (threadIdx.x < 16) cu_mma_bf16(d, a, b);
    else cu_ldmatrix_x4(a, sm);
}
static void test_diverged_warp(void) {
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        cu_emu::launch(diverged_kernel, dim3(1), dim3(32))();
        _exit(0);
    }
    close(fds[1]);
    char msg[512] = {0};
    ssize_t n = read(fds[0], msg, sizeof msg - 1);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(n > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1 && strstr(msg, "another instruction (a diverged warp)"),
          "a diverged warp: exit status %d, message '%s'", status, msg);
}

static void test_elementwise(void) {
    int64_t n = 1000;
    vec a = rnd(n, 1), b = rnd(n, 2), o1(n), o2(n);
    cu_add(o1.data(), a.data(), b.data(), n), k_add(o2.data(), a.data(), b.data(), n);
    CHECK(same(o1, o2), "add");
    o1 = a, o2 = a;
    cu_axpy(o1.data(), 0.37f, b.data(), n), k_axpy(o2.data(), 0.37f, b.data(), n);
    CHECK(same(o1, o2), "axpy");
    cu_scale(o1.data(), -1.7f, n), k_scale(o2.data(), -1.7f, n);
    CHECK(same(o1, o2), "scale");
    cu_zero(o1.data(), n);
    CHECK(same(o1, vec(n, 0.0f)), "zero");
    cu_copy(o1.data(), a.data(), n);
    CHECK(same(o1, a), "copy");
    a[3] = NAN, a[4] = INFINITY, a[5] = 1.00390625f;   // a tie: rounds to even
    std::vector<uint16_t> h1(n), h2(n);
    cu_round_rows(h1.data(), a.data(), 1, n, n), k_bf16_round(h2.data(), a.data(), n);   // cast's rounding
    CHECK(h1 == h2, "round_rows (cast fp32 -> bf16)");
    vec big = rnd(70001, 3);
    double s1 = -1.0, s2 = k_sumsq(big.data(), 70001);
    cu_sumsq(big.data(), 70001, &s1);
    CHECK(fabs(s1 - s2) <= 1e-14 * s2, "sumsq %.17g against %.17g", s1, s2);
    cu_sumsq(big.data(), 0, &s1);
    CHECK(s1 == 0.0, "sumsq of nothing is 0");
    int64_t f1 = 7;
    cu_first_nonfinite(big.data(), 70001, &f1);
    CHECK(f1 == -1 && k_first_nonfinite(big.data(), 70001) == -1, "first_nonfinite: none");
    big[69999] = NAN, big[40000] = -INFINITY;
    cu_first_nonfinite(big.data(), 70001, &f1);
    CHECK(f1 == 40000 && k_first_nonfinite(big.data(), 70001) == 40000, "first_nonfinite: %lld", (long long)f1);
    cu_first_nonfinite(big.data(), 0, &f1);
    CHECK(f1 == -1, "first_nonfinite of nothing");
    vec t1(6 * 7 * 3), t2(6 * 7 * 3), src = rnd(6 * 7 * 3, 40);
    cu_transpose(t1.data(), src.data(), 3, 6, 7), k_transpose(t2.data(), src.data(), 3, 6, 7);
    CHECK(same(t1, t2), "transpose");
}

// matmul's dbias (cu_bias_grad, cu_gemm.c's) of an fp32 and of a bf16 a = dout^T (dout [N, O] row-major: M = O,
// K = N, strides 1 and O): bit for bit k_matmul's (the same double sums, k in order)
static void test_bias_grad(void) {
    int64_t N = 300, O = 37;
    vec d = rnd(N * O, 31), zero(N);
    std::vector<uint16_t> d16(N * O);
    k_bf16_round(d16.data(), d.data(), N * O);
    for (int bf16 = 0; bf16 < 2; bf16++) {
        vec g1 = rnd(O, 32), g2 = g1;
        const void *a = bf16 ? (const void *)d16.data() : (const void *)d.data();
        cu_bias_grad(g1.data(), a, bf16, O, N, 1, O);
        os_tensor at = os_tensor_t(bf16 ? os_mat(a, OS_BF16, N, O, O) : os_matf(d.data(), N, O, O));
        k_matmul(os_tensor_none(), at, os_matf(zero.data(), N, 1, 1), 1.0f, 0.0f, os_tensor_none(), os_vecf(g2.data(), O));
        CHECK(same(g1, g2), "matmul's dbias of a %s a equals k_matmul's bit for bit", bf16 ? "bf16" : "fp32");
    }
}

static void test_adamw(void) {
    int64_t n = 777;
    vec p1 = rnd(n, 4), g1 = rnd(n, 5), m1 = rnd(n, 6, 0.0f, 0.1f), v1 = rnd(n, 7, 0.0f, 0.01f);
    vec p2 = p1, g2 = g1, m2 = m1, v2 = v1;
    cu_adamw(p1.data(), g1.data(), m1.data(), v1.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
    k_adamw(p2.data(), g2.data(), m2.data(), v2.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
    CHECK(same(p1, p2) && same(g1, g2) && same(m1, m2) && same(v1, v2), "adamw equals k_adamw bit for bit");
}

// ids [B, R, L] (ids repeated within and across rows); the backward's list grouped by table row (os_ids_group);
// C above CU_THREADS: a table row's columns over several blocks
static void test_embedding(int64_t B, int64_t R, int64_t L, int64_t C) {
    int64_t N = B * R * L, V = 40;
    std::vector<int32_t> ids(N), uniq(N), start(N + 1), rows(N);
    for (int64_t n = 0; n < N; n++) ids[n] = n % 4 == 1 ? 7 : (int32_t)((n * n + 1) % V);
    vec tab = rnd(V * C, 8), o1 = rnd(B * L * C, 9), o2 = o1, dout = rnd(B * L * C, 10);
    cu_embedding_fwd(o1.data(), ids.data(), tab.data(), B, R, L, C, 0.25f);
    k_embedding_fwd(o2.data(), ids.data(), tab.data(), B, R, L, C, 0.25f);
    CHECK(same(o1, o2), "embedding_fwd");
    int64_t nu = os_ids_group(ids.data(), N, uniq.data(), start.data(), rows.data());
    for (int64_t j = 0; j < N; j++) rows[j] = (int32_t)(rows[j] / (R * L) * L + rows[j] % L);
    vec d1 = rnd(V * C, 11), d2 = d1;
    cu_embedding_bwd(d1.data(), uniq.data(), start.data(), rows.data(), dout.data(), nu, C, 0.75f);
    k_embedding_bwd(d2.data(), uniq.data(), start.data(), rows.data(), dout.data(), nu, C, 0.75f);
    CHECK(same(d1, d2), "embedding_bwd equals k_embedding_bwd bit for bit");
}

static void test_rope(void) {
    int64_t B = 2, T = 9, H = 3, D = 16;
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(t * 397 + 5);   // positions in the thousands
    vec c1(T * D / 2), s1(T * D / 2), c2(T * D / 2), s2(T * D / 2);
    cu_rope_table(c1.data(), s1.data(), pos.data(), T, D, 1e6f);
    k_rope_table(c2.data(), s2.data(), pos.data(), T, D, 1e6f);
    CHECK(close(c1, c2, 1.2e-7, 1.2e-7, "rope cos") && close(s1, s2, 1.2e-7, 1.2e-7, "rope sin"), "rope_table within 1 ulp");
    int64_t KH = 2;   // q [B,T,H,D] and k [B,T,KH,D] in one call, and q alone
    vec x1 = rnd(B * T * H * D, 12), x2 = x1, k1 = rnd(B * T * KH * D, 13), k2 = k1;
    cu_rope_fwd(x1.data(), k1.data(), c2.data(), s2.data(), B, T, H, KH, D);
    k_rope_fwd(x2.data(), k2.data(), c2.data(), s2.data(), B, T, H, KH, D);
    CHECK(same(x1, x2) && same(k1, k2), "rope_fwd");
    cu_rope_bwd(x1.data(), k1.data(), c2.data(), s2.data(), B, T, H, KH, D);
    k_rope_bwd(x2.data(), k2.data(), c2.data(), s2.data(), B, T, H, KH, D);
    CHECK(same(x1, x2) && same(k1, k2), "rope_bwd");
    cu_rope_fwd(x1.data(), NULL, c2.data(), s2.data(), B, T, H, 0, D);
    k_rope_fwd(x2.data(), NULL, c2.data(), s2.data(), B, T, H, 0, D);
    CHECK(same(x1, x2), "rope_fwd of q alone");
}

static void test_norms(void) {
    int64_t N = 37, C = 300;
    vec x = rnd(N * C, 13, -2.0f, 2.0f), w = rnd(C, 14), b = rnd(C, 15), g = rnd(N * C, 16);
    vec o1(N * C), o2(N * C), r1(N), r2(N), m1(N), m2(N);
    cu_rmsnorm_fwd(o1.data(), r1.data(), x.data(), NULL, w.data(), N, C, 1e-6f);
    k_rmsnorm_fwd(o2.data(), r2.data(), x.data(), NULL, w.data(), N, C, 1e-6f);
    CHECK(close(o1, o2, 1e-7, 3e-7, "rmsnorm out") && close(r1, r2, 0, 2e-7, "rmsnorm rstd"), "rmsnorm_fwd");
    {   // with a residual: x += res (the same sums), then the norm
        vec x1 = x, x2 = x, res = rnd(N * C, 19, -1.0f, 1.0f), p1(N * C), p2(N * C), q1(N), q2(N);
        cu_rmsnorm_fwd(p1.data(), q1.data(), x1.data(), res.data(), w.data(), N, C, 1e-6f);
        k_rmsnorm_fwd(p2.data(), q2.data(), x2.data(), res.data(), w.data(), N, C, 1e-6f);
        CHECK(same(x1, x2) && close(p1, p2, 1e-7, 3e-7, "rmsnorm res out") && close(q1, q2, 0, 2e-7, "rmsnorm res rstd"),
              "rmsnorm_fwd with a residual");
    }
    vec di1 = rnd(N * C, 17), di2 = di1, dw1 = rnd(C, 18), dw2 = dw1;
    cu_rmsnorm_bwd(di1.data(), dw1.data(), g.data(), x.data(), w.data(), r2.data(), N, C);
    k_rmsnorm_bwd(di2.data(), dw2.data(), g.data(), x.data(), w.data(), r2.data(), N, C);
    CHECK(close(di1, di2, 1e-6, 1e-6, "rmsnorm dinp") && close(dw1, dw2, 1e-7, 2e-7, "rmsnorm dw"), "rmsnorm_bwd");
    cu_rmsnorm_bwd(NULL, dw1.data(), g.data(), x.data(), w.data(), r2.data(), N, C);
    k_rmsnorm_bwd(NULL, dw2.data(), g.data(), x.data(), w.data(), r2.data(), N, C);
    CHECK(close(dw1, dw2, 1e-7, 2e-7, "rmsnorm dw only"), "rmsnorm_bwd without dinp");
    cu_layernorm_fwd(o1.data(), m1.data(), r1.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
    k_layernorm_fwd(o2.data(), m2.data(), r2.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
    CHECK(close(o1, o2, 1e-7, 3e-7, "layernorm out") && close(m1, m2, 1e-8, 2e-7, "layernorm mean"), "layernorm_fwd");
    cu_layernorm_fwd(o1.data(), NULL, NULL, x.data(), NULL, NULL, N, C, 1e-5f);
    k_layernorm_fwd(o2.data(), NULL, NULL, x.data(), NULL, NULL, N, C, 1e-5f);
    CHECK(close(o1, o2, 1e-7, 3e-7, "layernorm plain"), "layernorm_fwd without w, b");
}

static void test_activations(void) {
    int64_t n = 999;
    vec gt = rnd(n, 19, -8.0f, 8.0f), up = rnd(n, 20), dout = rnd(n, 21), o1(n), o2(n);
    cu_swiglu_fwd(o1.data(), gt.data(), up.data(), n), k_swiglu_fwd(o2.data(), gt.data(), up.data(), n);
    CHECK(close(o1, o2, 1e-7, 1e-6, "swiglu"), "swiglu_fwd");
    vec dg1 = rnd(n, 22), dg2 = dg1, du1 = rnd(n, 23), du2 = du1;
    cu_swiglu_bwd(dg1.data(), du1.data(), dout.data(), gt.data(), up.data(), n, 1);
    k_swiglu_bwd(dg2.data(), du2.data(), dout.data(), gt.data(), up.data(), n, 1);
    CHECK(close(dg1, dg2, 1e-7, 1e-6, "swiglu dgate") && close(du1, du2, 1e-7, 1e-6, "swiglu dup"), "swiglu_bwd");
    cu_swiglu_bwd(NULL, du1.data(), dout.data(), gt.data(), up.data(), n, 1);
    k_swiglu_bwd(NULL, du2.data(), dout.data(), gt.data(), up.data(), n, 1);
    CHECK(close(du1, du2, 1e-7, 1e-6, "swiglu dup only"), "swiglu_bwd without dgate");
    vec zg(n, 0.0f), zu(n, 0.0f), ng(n, NAN), nu(n, NAN);   // acc 0: NaN before (not read), the bits of acc 1 on zeros
    cu_swiglu_bwd(zg.data(), zu.data(), dout.data(), gt.data(), up.data(), n, 1);
    cu_swiglu_bwd(ng.data(), nu.data(), dout.data(), gt.data(), up.data(), n, 0);
    CHECK(same(zg, ng) && same(zu, nu), "swiglu_bwd acc 0: not the bits of accumulating onto zeros");
    cu_gelu_fwd(o1.data(), gt.data(), n), k_gelu_fwd(o2.data(), gt.data(), n);
    CHECK(close(o1, o2, 1e-7, 1e-6, "gelu"), "gelu_fwd");
    o1 = gt, o2 = gt;
    cu_relu_fwd(o1.data(), o1.data(), n), k_relu_fwd(o2.data(), o2.data(), n);
    CHECK(same(o1, o2), "relu_fwd in place");
    vec d1 = dout, d2 = dout;
    cu_relu_grad(d1.data(), o1.data(), n), k_relu_grad(d2.data(), o2.data(), n);
    CHECK(same(d1, d2), "relu_grad");
    for (int acc = 0; acc < 2; acc++) {
        d1 = dout, d2 = dout;
        cu_dropout(d1.data(), up.data(), n, 0.3f, 12345u, acc), k_dropout(d2.data(), up.data(), n, 0.3f, 12345u, acc);
        CHECK(same(d1, d2), "dropout acc %d", acc);
    }
}

static void conv_case(int64_t Cin, int64_t Tin, int64_t Cout, int64_t K, int64_t stride, int64_t pad, bool bias) {
    int64_t Tout = (Tin + 2 * pad - K) / stride + 1;
    vec x = rnd(Cin * Tin, 24), w = rnd(Cout * Cin * K, 25), b = rnd(Cout, 26), o1(Cout * Tout, 9.0f), o2(Cout * Tout);
    cu_conv1d_fwd(o1.data(), x.data(), w.data(), bias ? b.data() : NULL, Cin, Tin, Cout, K, stride, pad);
    k_conv1d_fwd(o2.data(), x.data(), w.data(), bias ? b.data() : NULL, Cin, Tin, Cout, K, stride, pad);
    CHECK(close(o1, o2, 1e-5 * (double)(Cin * K), 0, "conv1d"), "conv1d Cin %lld Tin %lld Cout %lld K %lld stride %lld",
          (long long)Cin, (long long)Tin, (long long)Cout, (long long)K, (long long)stride);
}

// bf16 mode against the CPU's bf16 kernel (k_conv1d_fwd_prec 1: operands rounded to bf16, fp32 sums): on random
// inputs within conv_case's bound; and bit for bit on inputs that round to multiples of 1/16 in [-1, 1] (w and
// inp a multiple of 1/16 times 1 + 2^-12, which bf16's 8 bits round away; the fp32 bias a multiple of 1/16), whose
// products and sums are exact in fp32 in any order (multiples of 1/256 of magnitude at most Cin * K + 1): an
// operand left unrounded changes the sums' bits
static void conv_bf16_case(int64_t Cin, int64_t Tin, int64_t Cout, int64_t K, int64_t stride, int64_t pad) {
    int64_t Tout = (Tin + 2 * pad - K) / stride + 1;
    vec x = rnd(Cin * Tin, 28), w = rnd(Cout * Cin * K, 29), b = rnd(Cout, 30), o1(Cout * Tout, 9.0f), o2(Cout * Tout);
    cu_conv1d_set_bf16(1);
    cu_conv1d_fwd(o1.data(), x.data(), w.data(), b.data(), Cin, Tin, Cout, K, stride, pad);
    k_conv1d_fwd_prec(1, o2.data(), x.data(), w.data(), b.data(), Cin, Tin, Cout, K, stride, pad);
    CHECK(close(o1, o2, 1e-5 * (double)(Cin * K), 0, "conv1d bf16"), "conv1d bf16 Cin %lld Tin %lld Cout %lld",
          (long long)Cin, (long long)Tin, (long long)Cout);
    for (vec *v : {&x, &w, &b})
        for (float &f : *v) f = roundf(f * 16.0f) / 16.0f * (v == &b ? 1.0f : 1.0f + 0x1p-12f);
    vec f1(Cout * Tout, 9.0f);
    cu_conv1d_fwd(o1.data(), x.data(), w.data(), b.data(), Cin, Tin, Cout, K, stride, pad);
    cu_conv1d_set_bf16(0);
    cu_conv1d_fwd(f1.data(), x.data(), w.data(), b.data(), Cin, Tin, Cout, K, stride, pad);
    k_conv1d_fwd_prec(1, o2.data(), x.data(), w.data(), b.data(), Cin, Tin, Cout, K, stride, pad);
    CHECK(same(o1, o2), "conv1d bf16 equals k_conv1d_fwd_prec(1) bit for bit (exact sums) Cin %lld Tin %lld",
          (long long)Cin, (long long)Tin);
    CHECK(!same(o1, f1), "conv1d fp32 mode does not round (differs from bf16 mode)");
}

static void xent_case(int64_t N, int64_t V, int64_t ld) {
    vec x = rnd(N * ld, 27, -4.0f, 4.0f);
    std::vector<int32_t> y(N);
    for (int64_t n = 0; n < N; n++) {
        y[n] = n % 6 == 5 ? -100 : (int32_t)((n * 13) % V);
        if (n % 2) x[n * ld + y[n] % V] += 9.0f;   // half the rows predict their label
    }
    // a tie for the maximum at the label and 512 columns on (the same thread's columns): the first one counts
    x[2 * ld + y[2]] = x[2 * ld + (y[2] + 512) % V] = 20.0f;
    vec x2 = x;
    double s1 = 1.5, s2 = 1.5;
    int64_t c1 = 3, c2 = 3;
    cu_xent_fwd_bwd(x.data(), ld, y.data(), N, V, 0.25f, &s1, &c1);
    s2 += k_xent_fwd_bwd(x2.data(), ld, y.data(), N, V, 0.25f, &c2);
    CHECK(c1 == c2, "xent N%lld V%lld: correct %lld against %lld", (long long)N, (long long)V, (long long)c1, (long long)c2);
    CHECK(fabs(s1 - s2) <= 1e-6 * fabs(s2), "xent N%lld V%lld: loss %.12g against %.12g", (long long)N, (long long)V, s1, s2);
    CHECK(close(x, x2, 1e-9, 1e-5, "xent gradient"), "xent N%lld V%lld gradient", (long long)N, (long long)V);
}

// cu_attention_bwd with acc 0 (dq/dk/dv NaN before: not read) gives the bits of acc 1 onto zeros
static void attention_overwrite(const char *what, const vec &dout, const vec &q, const vec &k, const vec &v,
                                const vec &o, const vec &st, const uint8_t *m, const int32_t *sg, int causal,
                                int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D) {
    int64_t nq = B * T * H * D, nk = B * T * KH * D;
    vec z[3] = {vec(nq, 0.0f), vec(nk, 0.0f), vec(nk, 0.0f)}, w[3] = {vec(nq, NAN), vec(nk, NAN), vec(nk, NAN)};
    cu_attention_bwd(z[0].data(), z[1].data(), z[2].data(), dout.data(), q.data(), k.data(), v.data(), o.data(),
                     st.data(), m, sg, causal, B, T, H, KH, D, 1);
    cu_attention_bwd(w[0].data(), w[1].data(), w[2].data(), dout.data(), q.data(), k.data(), v.data(), o.data(),
                     st.data(), m, sg, causal, B, T, H, KH, D, 0);
    for (int i = 0; i < 3; i++)
        CHECK(same(z[i], w[i]), "%s: %s with acc 0 is not the bits of accumulating onto zeros", what,
              i == 0 ? "dq" : i == 1 ? "dk" : "dv");
}

// one training attention shape: forward, then backward from each backend's own stats, accumulating into dq/dk/dv
static void attention_case(int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D, int causal, bool mask, bool segs) {
    int64_t nq = B * T * H * D, nk = B * T * KH * D;
    std::vector<uint8_t> km(B * T, 1);
    std::vector<int32_t> seg(B * T);
    for (int64_t i = 0; i < B * T; i++) {
        km[i] = !((i >= T && i >= B * T - T / 4) || i == 2);   // padding at the end of row 1, key 2 of row 0
        seg[i] = (int32_t)(3 * ((i % T) + i / T) / (T + 1));
    }
    const uint8_t *m = mask ? km.data() : NULL;
    const int32_t *sg = segs ? seg.data() : NULL;
    vec q = rnd(nq, 28, -2.0f, 2.0f), k = rnd(nk, 29, -2.0f, 2.0f), v = rnd(nk, 30), dout = rnd(nq, 31);
    vec o1(nq, 5.0f), o2(nq), st1(cu_attention_stats_floats(B, T, H)), st2(k_attention_stats_floats(B, T, H));
    cu_attention_fwd(o1.data(), st1.data(), q.data(), k.data(), v.data(), m, sg, causal, B, T, H, KH, D);
    k_attention_fwd(o2.data(), st2.data(), q.data(), k.data(), v.data(), m, sg, causal, B, T, H, KH, D);
    char what[160];
    snprintf(what, sizeof what, "attention B%lld T%lld H%lld/%lld D%lld causal %d mask %d seg %d", (long long)B,
             (long long)T, (long long)H, (long long)KH, (long long)D, causal, mask, segs);
    CHECK(close(o1, o2, 1e-5, 1e-4, what), "%s: out", what);
    vec g1[3] = {rnd(nq, 32), rnd(nk, 33), rnd(nk, 34)}, g2[3] = {g1[0], g1[1], g1[2]};
    cu_attention_bwd(g1[0].data(), g1[1].data(), g1[2].data(), dout.data(), q.data(), k.data(), v.data(), o1.data(),
                     st1.data(), m, sg, causal, B, T, H, KH, D, 1);
    k_attention_bwd(g2[0].data(), g2[1].data(), g2[2].data(), dout.data(), q.data(), k.data(), v.data(), o2.data(),
                    st2.data(), m, sg, causal, B, T, H, KH, D, 1);
    for (int i = 0; i < 3; i++) CHECK(close(g1[i], g2[i], 1e-4, 1e-4, what), "%s: %s", what, i == 0 ? "dq" : i == 1 ? "dk" : "dv");
    cu_attention_bwd(NULL, NULL, g1[2].data(), dout.data(), q.data(), k.data(), v.data(), o1.data(), st1.data(), m, sg,
                     causal, B, T, H, KH, D, 1);
    k_attention_bwd(NULL, NULL, g2[2].data(), dout.data(), q.data(), k.data(), v.data(), o2.data(), st2.data(), m, sg,
                    causal, B, T, H, KH, D, 1);
    CHECK(close(g1[2], g2[2], 1e-4, 1e-4, what), "%s: dv alone", what);
    attention_overwrite(what, dout, q, k, v, o1, st1, m, sg, causal, B, T, H, KH, D);
}

// ---- the tensor-core kernels (bf16 mode) against the CPU kernel in fp32, within docs/design.md's bf16 bounds ----
// Per query row t: delta_t bounds the error of every score from rounding q and k (relative u = 2^-8 each) and the
// fp32 sums, eps_t = e^(2 delta_t) - 1 the relative error of every probability it gives; then each output's bound
// is the sum of |terms| of its product times the relative errors of their factors (P, v, dO, dS rounded to bf16:
// u each), first order, times 1.25 for the higher orders. `exact`: inputs that are bf16 values already (no
// rounding of q, k, v, dO: the bounds shrink to the rounding of P and dS, which the kernels do themselves).
static const double U = 0x1p-8;   // bf16 unit roundoff: 8 significant bits, round to nearest
static float bf16_round(float f) { return float_of(bf16_of(f)); }

struct tc_ref {   // double-precision definitions for one (b, h): P[t][s], dP, Drow
    std::vector<double> P, dP, Dr, lse, delta;
};

static void tc_attention_case(int64_t B, int64_t T, int64_t H, int64_t KH, int64_t D, int causal, int mask, bool segs,
                              bool exact) {
    int64_t nq = B * T * H * D, nk = B * T * KH * D, R = H / KH;
    std::vector<uint8_t> km(B * T, 1);
    std::vector<int32_t> seg(B * T);
    for (int64_t i = 0; i < B * T; i++) {
        km[i] = mask == 2 && i >= T ? 0 : !((i >= T && i >= B * T - T / 4) || i == 2);   // 2: batch row 1 all padding
        seg[i] = (int32_t)(3 * ((i % T) + i / T) / (T + 1));
    }
    const uint8_t *m = mask ? km.data() : NULL;
    const int32_t *sg = segs ? seg.data() : NULL;
    vec q = rnd(nq, 50, -1.0f, 1.0f), k = rnd(nk, 51, -1.0f, 1.0f), v = rnd(nk, 52), dout = rnd(nq, 53);
    if (exact)
        for (vec *x : {&q, &k, &v, &dout})
            for (float &f : *x) f = bf16_round(f);
    char what[200];
    snprintf(what, sizeof what, "tensor-core attention B%lld T%lld H%lld/%lld D%lld causal %d mask %d seg %d exact %d",
             (long long)B, (long long)T, (long long)H, (long long)KH, (long long)D, causal, mask, segs, exact);
    // the CPU kernel in fp32, the CUDA one in bf16 mode
    vec o1(nq, 5.0f), o2(nq), st1(cu_attention_stats_floats(B, T, H)), st2(k_attention_stats_floats(B, T, H));
    cu_attention_set_bf16(0);
    k_attention_fwd(o2.data(), st2.data(), q.data(), k.data(), v.data(), m, sg, causal, B, T, H, KH, D);
    vec g2[3] = {rnd(nq, 54), rnd(nk, 55), rnd(nk, 56)}, g1[3] = {g2[0], g2[1], g2[2]};
    k_attention_bwd(g2[0].data(), g2[1].data(), g2[2].data(), dout.data(), q.data(), k.data(), v.data(), o2.data(),
                    st2.data(), m, sg, causal, B, T, H, KH, D, 1);
    cu_attention_set_bf16(1);
    cu_attention_fwd(o1.data(), st1.data(), q.data(), k.data(), v.data(), m, sg, causal, B, T, H, KH, D);
    cu_attention_bwd(g1[0].data(), g1[1].data(), g1[2].data(), dout.data(), q.data(), k.data(), v.data(), o1.data(),
                     st1.data(), m, sg, causal, B, T, H, KH, D, 1);
    vec dv_alone = rnd(nk, 56);   // only dv wanted: the same bits as dv beside dq and dk
    cu_attention_bwd(NULL, NULL, dv_alone.data(), dout.data(), q.data(), k.data(), v.data(), o1.data(), st1.data(), m,
                     sg, causal, B, T, H, KH, D, 1);
    attention_overwrite(what, dout, q, k, v, o1, st1, m, sg, causal, B, T, H, KH, D);
    cu_attention_set_bf16(0);
    CHECK(same(dv_alone, g1[2]), "%s: dv alone differs from dv beside dq and dk", what);
    const double uin = exact ? 0.0 : U, scale = 1.0 / sqrt((double)D), acc = 0x1p-24 * (double)(D > T ? D : T);
    vec bo(nq), bg[3] = {vec(nq), vec(nk), vec(nk)};
    double worst[4] = {0, 0, 0, 0};
    int lse_bad = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t gk = h / R;
            auto Q = [&](int64_t t, int64_t d) { return (double)q[((b * T + t) * H + h) * D + d]; };
            auto K = [&](int64_t s, int64_t d) { return (double)k[((b * T + s) * KH + gk) * D + d]; };
            auto V = [&](int64_t s, int64_t d) { return (double)v[((b * T + s) * KH + gk) * D + d]; };
            auto dO = [&](int64_t t, int64_t d) { return (double)dout[((b * T + t) * H + h) * D + d]; };
            auto ok = [&](int64_t t, int64_t s) {
                return !(causal && s > t) && !(m && !m[b * T + s]) && !(sg && sg[b * T + s] != sg[b * T + t]);
            };
            std::vector<double> P(T * T, 0.0), dS(T * T, 0.0), eS(T * T, 0.0), eps(T), eD(T);
            for (int64_t t = 0; t < T; t++) {   // the forward: P, lse, delta, out's bound
                double mx = -INFINITY, sum = 0.0, dl = 0.0;
                std::vector<double> x(T, -INFINITY);
                for (int64_t s = 0; s < T; s++) {
                    if (!ok(t, s)) continue;
                    double dot = 0.0, ab = 0.0;
                    for (int64_t d = 0; d < D; d++) dot += Q(t, d) * K(s, d), ab += fabs(Q(t, d) * K(s, d));
                    x[s] = scale * dot, mx = fmax(mx, x[s]), dl = fmax(dl, scale * ab * (2 * uin + acc));
                }
                for (int64_t s = 0; s < T; s++) sum += x[s] == -INFINITY ? 0.0 : exp(x[s] - mx);
                for (int64_t s = 0; s < T; s++) P[t * T + s] = x[s] == -INFINITY ? 0.0 : exp(x[s] - mx) / sum;
                eps[t] = expm1(2 * dl);
                float lse = st1[(b * H + h) * T + t];
                double want = mx == -INFINITY ? -INFINITY : mx + log(sum);
                if (mx == -INFINITY ? lse != -INFINITY : !(fabs(lse - want) <= 1.25 * dl + 1e-5 * (1 + fabs(want)))) {
                    if (!lse_bad++) fprintf(stderr, "%s: lse of row %lld: %.9g, want %.9g\n", what, (long long)t, lse, want);
                }
                eD[t] = 0.0;
                for (int64_t d = 0; d < D; d++) {
                    double sp = 0.0;
                    for (int64_t s = 0; s < T; s++) sp += P[t * T + s] * fabs(V(s, d));
                    double bound = 1.25 * (eps[t] + U + uin + acc) * sp + 1e-6;
                    bo[((b * T + t) * H + h) * D + d] = (float)bound;
                    eD[t] += fabs(dO(t, d)) * bound;
                }
            }
            for (int64_t t = 0; t < T; t++) {   // dS and its error bound
                std::vector<double> dP(T, 0.0), edp(T, 0.0);
                double Dr = 0.0;
                for (int64_t s = 0; s < T; s++) {
                    for (int64_t d = 0; d < D; d++) dP[s] += dO(t, d) * V(s, d), edp[s] += fabs(dO(t, d) * V(s, d));
                    Dr += P[t * T + s] * dP[s];
                }
                for (int64_t s = 0; s < T; s++) {
                    double p = P[t * T + s];
                    dS[t * T + s] = p * (dP[s] - Dr);
                    eS[t * T + s] = eps[t] * p * fabs(dP[s] - Dr) + p * (edp[s] * (2 * uin + acc) + eD[t]);
                }
            }
            for (int64_t t = 0; t < T; t++)
                for (int64_t d = 0; d < D; d++) {   // dq
                    double e = 0.0;
                    for (int64_t s = 0; s < T; s++) e += (eS[t * T + s] + (U + uin + acc) * fabs(dS[t * T + s])) * fabs(K(s, d));
                    bg[0][((b * T + t) * H + h) * D + d] = (float)(1.25 * scale * e + 1e-6);
                }
            for (int64_t s = 0; s < T; s++)
                for (int64_t d = 0; d < D; d++) {   // dk, dv: this head's share of its kv head's rows
                    double ek = 0.0, ev = 0.0;
                    for (int64_t t = 0; t < T; t++) {
                        ek += (eS[t * T + s] + (U + uin + acc) * fabs(dS[t * T + s])) * fabs(Q(t, d));
                        ev += P[t * T + s] * fabs(dO(t, d)) * (eps[t] + U + uin + acc);
                    }
                    int64_t i = ((b * T + s) * KH + gk) * D + d;
                    bg[1][i] += (float)(1.25 * scale * ek + 1e-6 / R), bg[2][i] += (float)(1.25 * ev + 1e-6 / R);
                }
        }
    CHECK(!lse_bad, "%s: %d rows' log-sum-exp out of bounds", what, lse_bad);
    const vec *got[4] = {&o1, &g1[0], &g1[1], &g1[2]}, *want[4] = {&o2, &g2[0], &g2[1], &g2[2]}, *bnd[4] = {&bo, &bg[0], &bg[1], &bg[2]};
    const char *name[4] = {"out", "dq", "dk", "dv"};
    for (int x = 0; x < 4; x++) {
        size_t at = 0;
        for (size_t i = 0; i < got[x]->size(); i++) {
            double r = fabs((double)(*got[x])[i] - (*want[x])[i]) / (*bnd[x])[i];
            if (!(r <= worst[x])) worst[x] = r, at = i;
        }
        CHECK(worst[x] <= 1.0, "%s: %s element %zu: %.9g against the CPU's %.9g (bound %.3g)", what, name[x], at,
              (*got[x])[at], (*want[x])[at], (*bnd[x])[at]);
    }
    if (getenv("CU_EMU_VERBOSE"))
        printf("%s: error / bound: out %.3f dq %.3f dk %.3f dv %.3f\n", what, worst[0], worst[1], worst[2], worst[3]);
}

// bf16: the CUDA call in bf16 mode (decode rows take the same fp32 kernel in both modes)
static void cached_case(int64_t B, int64_t T, int64_t p0, int64_t S, int64_t H, int64_t KH, int64_t D, int bf16 = 0) {
    int64_t nq = B * T * H * D, nk = B * S * KH * D;
    vec q = rnd(nq, 35, -2.0f, 2.0f), k = rnd(nk, 36, -2.0f, 2.0f), v = rnd(nk, 37), o1(nq), o2(nq);
    cu_attention_set_bf16(bf16);
    cu_attention_cached_fwd(o1.data(), q.data(), k.data(), v.data(), B, T, p0, S, H, KH, D);
    cu_attention_set_bf16(0);
    k_attention_cached_fwd(o2.data(), q.data(), k.data(), v.data(), B, T, p0, S, H, KH, D);
    CHECK(close(o1, o2, 1e-5, 1e-4, "cached attention"), "cached attention B%lld T%lld p0 %lld S%lld H%lld/%lld D%lld",
          (long long)B, (long long)T, (long long)p0, (long long)S, (long long)H, (long long)KH, (long long)D);
}

// the KV-cached forward past the decode rows (a prefill at p0) on tensor cores: bf16 inputs (exact), bound as
// tc_attention_case's out: 1.25 (u + fp32 sums) sum_s P |v|
static void cached_tc_case(int64_t B, int64_t T, int64_t p0, int64_t S, int64_t H, int64_t KH, int64_t D) {
    int64_t nq = B * T * H * D, nk = B * S * KH * D, K = p0 + T;
    vec q = rnd(nq, 57, -1.0f, 1.0f), k = rnd(nk, 58, -1.0f, 1.0f), v = rnd(nk, 59), o1(nq), o2(nq);
    for (vec *x : {&q, &k, &v})
        for (float &f : *x) f = bf16_round(f);
    k_attention_cached_fwd(o2.data(), q.data(), k.data(), v.data(), B, T, p0, S, H, KH, D);
    cu_attention_set_bf16(1);
    cu_attention_cached_fwd(o1.data(), q.data(), k.data(), v.data(), B, T, p0, S, H, KH, D);
    cu_attention_set_bf16(0);
    double worst = 0.0, scale = 1.0 / sqrt((double)D);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                const float *qr = &q[((b * T + t) * H + h) * D];
                std::vector<double> x(K);
                double mx = -INFINITY, sum = 0.0;
                for (int64_t s = 0; s <= p0 + t; s++) {
                    const float *kr = &k[((b * S + s) * KH + h / (H / KH)) * D];
                    double dot = 0.0;
                    for (int64_t d = 0; d < D; d++) dot += (double)qr[d] * kr[d];
                    x[s] = scale * dot, mx = fmax(mx, x[s]);
                }
                for (int64_t s = 0; s <= p0 + t; s++) sum += exp(x[s] - mx);
                for (int64_t d = 0; d < D; d++) {
                    double sp = 0.0;
                    for (int64_t s = 0; s <= p0 + t; s++)
                        sp += exp(x[s] - mx) / sum * fabs(v[((b * S + s) * KH + h / (H / KH)) * D + d]);
                    size_t i = (size_t)(((b * T + t) * H + h) * D + d);
                    worst = fmax(worst, fabs(o1[i] - o2[i]) / (1.25 * (U + 0x1p-24 * K) * sp + 1e-6));
                }
            }
    CHECK(worst <= 1.0, "cached attention on tensor cores B%lld T%lld p0 %lld: error %.3f of the bound", (long long)B,
          (long long)T, (long long)p0, worst);
}

static void test_rows(void) {
    int64_t V = 40, C = 37, n = 300;   // more columns than a warp, fewer than a block
    std::vector<int32_t> idx(n);
    for (int64_t i = 0; i < n; i++) idx[i] = i % 7 == 3 ? -1 : i % 4 == 1 ? 7 : (int32_t)((i * i + 1) % V);
    vec src = rnd(V * C, 12), o1 = rnd(n * C, 13), o2 = o1;
    cu_gather_rows(o1.data(), src.data(), idx.data(), n, C), k_gather_rows(o2.data(), src.data(), idx.data(), n, C);
    CHECK(same(o1, o2), "gather_rows equals k_gather_rows (rows with idx < 0 kept)");
    vec rows = rnd(n * C, 14), d1 = rnd(V * C, 15), d2 = d1;
    cu_scatter_add_rows(d1.data(), rows.data(), idx.data(), n, C);
    k_scatter_add_rows(d2.data(), rows.data(), idx.data(), n, C);
    CHECK(same(d1, d2), "scatter_add_rows equals k_scatter_add_rows bit for bit (repeated rows in order)");
    vec b = rnd(C, 16), x1 = rnd(n * C, 17), x2 = x1, s1 = rnd(C, 18), s2 = s1;
    cu_sum_rows(s1.data(), x1.data(), n, C), k_sum_rows(s2.data(), x2.data(), n, C);
    CHECK(same(s1, s2), "sum_rows equals k_sum_rows bit for bit (rows in order)");
    cu_add_row_bias(x1.data(), b.data(), n, C), k_add_row_bias(x2.data(), b.data(), n, C);
    CHECK(same(x1, x2), "add_row_bias equals k_add_row_bias");
}

int main(void) {
    test_fragment_table();
    test_mma_ldmatrix();
    test_diverged_warp();
    test_elementwise();
    test_adamw();
    test_bias_grad();
    test_embedding(3, 4, 25, 5);
    test_embedding(1, 2, 20, 300);
    test_rows();
    test_rope();
    test_norms();
    test_activations();
    conv_case(3, 37, 40, 3, 2, 1, true);
    conv_case(9, 20, 5, 3, 1, 1, false);
    conv_bf16_case(80, 61, 40, 3, 1, 1);
    conv_bf16_case(9, 37, 5, 3, 2, 1);
    xent_case(7, 1001, 1003);
    xent_case(300, 37, 37);
    int64_t Ts[] = {1, 7, 70};
    for (int64_t T : Ts) {
        attention_case(2, T, 4, 2, 8, 1, false, false);
        attention_case(2, T, 4, 2, 8, 1, true, true);
        attention_case(1, T, 14, 2, 8, 0, true, false);
    }
    attention_case(1, 40, 2, 1, 64, 1, true, true);
    attention_case(1, 33, 2, 2, 100, 0, false, true);
    tc_attention_case(1, 70, 2, 1, 64, 1, 0, false, true);
    tc_attention_case(2, 70, 7, 7, 64, 1, 1, true, false);
    tc_attention_case(1, 33, 7, 1, 128, 0, 1, false, false);
    tc_attention_case(2, 130, 2, 2, 64, 1, 2, true, true);
    tc_attention_case(1, 20, 2, 1, 128, 1, 0, false, true);
    // segments alone skip key tiles (forward) and rows (backward); segment 1 starts at key 63, the last of a tile
    // (T 188), and segment 0 ends at row 64, the first of a backward row tile (T 192)
    tc_attention_case(1, 188, 1, 1, 64, 0, 0, true, true);
    tc_attention_case(1, 192, 1, 1, 64, 0, 0, true, true);
    cached_tc_case(2, 9, 30, 64, 4, 2, 64);
    cached_tc_case(1, 70, 5, 80, 2, 2, 128);
    cached_case(1, 3, 200, 210, 2, 1, 64);   // decode: 4 key splits
    cached_case(2, 1, 130, 140, 4, 2, 128, 1);
    cached_case(2, 1, 0, 8, 4, 2, 8);
    cached_case(1, 1, 40, 50, 14, 2, 64);
    cached_case(1, 7, 30, 64, 4, 2, 8);
    return check_report("test_cu_emu");
}
