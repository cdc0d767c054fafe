// 1-D convolution (PyTorch cross-correlation) as im2col + sgemm: col[Cin*K, Tout], out = w[Cout, Cin*K] @ col + b.
#include "kernels/kernels.h"
#include "core/alloc.h"

void k_conv1d_fwd_prec(int bf16, float *out, const float *inp, const float *w, const float *b, int64_t Cin, int64_t Tin,
                  int64_t Cout, int64_t K, int64_t stride, int64_t pad) {
    if (stride <= 0 || Cout <= 0 || Tin + 2 * pad < K) return;
    int64_t Tout = (Tin + 2 * pad - K) / stride + 1, CK = Cin * K;
    float *col = os_alloc((size_t)(CK * Tout) * sizeof(float), "conv1d im2col[Cin*K,Tout]");
#pragma omp parallel for schedule(static)
    for (int64_t ik = 0; ik < CK; ik++) {
        const float *x = inp + (ik / K) * Tin;
        int64_t off = ik % K - pad;
        for (int64_t t = 0; t < Tout; t++) {
            int64_t s = stride * t + off;
            col[ik * Tout + t] = s >= 0 && s < Tin ? x[s] : 0.0f;
        }
    }
    if (b) {
#pragma omp parallel for schedule(static)
        for (int64_t o = 0; o < Cout; o++)
            for (int64_t t = 0; t < Tout; t++) out[o * Tout + t] = b[o];
    }
    k_gemm_prec(bf16, 0, 0, Cout, Tout, CK, 1.0f, w, CK, col, Tout, b ? 1.0f : 0.0f, out, Tout);
    os_free(col);
}

void k_conv1d_fwd(float *out, const float *inp, const float *w, const float *b, int64_t Cin, int64_t Tin,
                  int64_t Cout, int64_t K, int64_t stride, int64_t pad) {
    k_conv1d_fwd_prec(0, out, inp, w, b, Cin, Tin, Cout, K, stride, pad);
}
