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
#include <vector>
extern "C" {
#include "cuda/cu_ops.h"
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
    cu_to_bf16(h1.data(), a.data(), n), k_bf16_round(h2.data(), a.data(), n);
    CHECK(h1 == h2, "to_bf16");
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

static void test_adamw(void) {
    int64_t n = 777;
    vec p1 = rnd(n, 4), g1 = rnd(n, 5), m1 = rnd(n, 6, 0.0f, 0.1f), v1 = rnd(n, 7, 0.0f, 0.01f);
    vec p2 = p1, g2 = g1, m2 = m1, v2 = v1;
    cu_adamw(p1.data(), g1.data(), m1.data(), v1.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
    k_adamw(p2.data(), g2.data(), m2.data(), v2.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
    CHECK(same(p1, p2) && same(g1, g2) && same(m1, m2) && same(v1, v2), "adamw equals k_adamw bit for bit");
}

static void test_embedding(void) {
    int64_t N = 300, C = 5, V = 40;
    std::vector<int32_t> ids(N);
    for (int64_t n = 0; n < N; n++) ids[n] = n % 4 == 1 ? 7 : (int32_t)((n * n + 1) % V);
    vec tab = rnd(V * C, 8), o1 = rnd(N * C, 9), o2 = o1, dout = rnd(N * C, 10);
    cu_embedding_acc(o1.data(), ids.data(), tab.data(), N, C, 1.5f), k_embedding_acc(o2.data(), ids.data(), tab.data(), N, C, 1.5f);
    CHECK(same(o1, o2), "embedding_acc");
    cu_embedding_fwd(o1.data(), ids.data(), tab.data(), N, C, 0.5f), k_embedding_fwd(o2.data(), ids.data(), tab.data(), N, C, 0.5f);
    CHECK(same(o1, o2), "embedding_fwd");
    vec d1 = rnd(V * C, 11), d2 = d1;
    cu_embedding_bwd(d1.data(), ids.data(), dout.data(), N, C, 0.75f);
    k_embedding_bwd(d2.data(), ids.data(), dout.data(), N, C, 0.75f);
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
    vec x1 = rnd(B * T * H * D, 12), x2 = x1;
    cu_rope_fwd(x1.data(), c2.data(), s2.data(), B, T, H, D), k_rope_fwd(x2.data(), c2.data(), s2.data(), B, T, H, D);
    CHECK(same(x1, x2), "rope_fwd");
    cu_rope_bwd(x1.data(), c2.data(), s2.data(), B, T, H, D), k_rope_bwd(x2.data(), c2.data(), s2.data(), B, T, H, D);
    CHECK(same(x1, x2), "rope_bwd");
}

static void test_norms(void) {
    int64_t N = 37, C = 300;
    vec x = rnd(N * C, 13, -2.0f, 2.0f), w = rnd(C, 14), b = rnd(C, 15), g = rnd(N * C, 16);
    vec o1(N * C), o2(N * C), r1(N), r2(N), m1(N), m2(N);
    cu_rmsnorm_fwd(o1.data(), r1.data(), x.data(), w.data(), N, C, 1e-6f);
    k_rmsnorm_fwd(o2.data(), r2.data(), x.data(), w.data(), N, C, 1e-6f);
    CHECK(close(o1, o2, 1e-7, 3e-7, "rmsnorm out") && close(r1, r2, 0, 2e-7, "rmsnorm rstd"), "rmsnorm_fwd");
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
    cu_swiglu_bwd(dg1.data(), du1.data(), dout.data(), gt.data(), up.data(), n);
    k_swiglu_bwd(dg2.data(), du2.data(), dout.data(), gt.data(), up.data(), n);
    CHECK(close(dg1, dg2, 1e-7, 1e-6, "swiglu dgate") && close(du1, du2, 1e-7, 1e-6, "swiglu dup"), "swiglu_bwd");
    cu_swiglu_bwd(NULL, du1.data(), dout.data(), gt.data(), up.data(), n);
    k_swiglu_bwd(NULL, du2.data(), dout.data(), gt.data(), up.data(), n);
    CHECK(close(du1, du2, 1e-7, 1e-6, "swiglu dup only"), "swiglu_bwd without dgate");
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
                     st1.data(), m, sg, causal, B, T, H, KH, D);
    k_attention_bwd(g2[0].data(), g2[1].data(), g2[2].data(), dout.data(), q.data(), k.data(), v.data(), o2.data(),
                    st2.data(), m, sg, causal, B, T, H, KH, D);
    for (int i = 0; i < 3; i++) CHECK(close(g1[i], g2[i], 1e-4, 1e-4, what), "%s: %s", what, i == 0 ? "dq" : i == 1 ? "dk" : "dv");
    cu_attention_bwd(NULL, NULL, g1[2].data(), dout.data(), q.data(), k.data(), v.data(), o1.data(), st1.data(), m, sg,
                     causal, B, T, H, KH, D);
    k_attention_bwd(NULL, NULL, g2[2].data(), dout.data(), q.data(), k.data(), v.data(), o2.data(), st2.data(), m, sg,
                    causal, B, T, H, KH, D);
    CHECK(close(g1[2], g2[2], 1e-4, 1e-4, what), "%s: dv alone", what);
}

static void cached_case(int64_t B, int64_t T, int64_t p0, int64_t S, int64_t H, int64_t KH, int64_t D) {
    int64_t nq = B * T * H * D, nk = B * S * KH * D;
    vec q = rnd(nq, 35, -2.0f, 2.0f), k = rnd(nk, 36, -2.0f, 2.0f), v = rnd(nk, 37), o1(nq), o2(nq);
    cu_attention_cached_fwd(o1.data(), q.data(), k.data(), v.data(), B, T, p0, S, H, KH, D);
    k_attention_cached_fwd(o2.data(), q.data(), k.data(), v.data(), B, T, p0, S, H, KH, D);
    CHECK(close(o1, o2, 1e-5, 1e-4, "cached attention"), "cached attention B%lld T%lld p0 %lld S%lld H%lld/%lld D%lld",
          (long long)B, (long long)T, (long long)p0, (long long)S, (long long)H, (long long)KH, (long long)D);
}

int main(void) {
    test_elementwise();
    test_adamw();
    test_embedding();
    test_rope();
    test_norms();
    test_activations();
    conv_case(3, 37, 40, 3, 2, 1, true);
    conv_case(9, 20, 5, 3, 1, 1, false);
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
    cached_case(2, 1, 0, 8, 4, 2, 8);
    cached_case(1, 1, 40, 50, 14, 2, 64);
    cached_case(1, 7, 30, 64, 4, 2, 8);
    return check_report("test_cu_emu");
}
