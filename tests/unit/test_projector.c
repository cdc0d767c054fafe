// Unit test of the speech projectors (src/model/projector.c), "linear" (concat-k) and "cov1d-linear": forward
// against a direct double loop of the reference's rule (including dropped trailing frames), backward against
// central finite differences of L = sum(dout * fwd(params)) for every coordinate of every parameter, and the
// accumulate / NULL-gradient rules.
#include "core/alloc.h"
#include "core/rng.h"
#include "model/projector.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static int nfail;

static void check(const char *name, int ok, double v, double tol) {
    printf("%s %s: %.3g (tolerance %.1g)\n", ok ? "ok  " : "FAIL", name, v, tol);
    nfail += !ok;
}

static float *rnd(int64_t n, uint64_t key, float lo, float hi) {
    float *x = os_alloc(sizeof(float) * (size_t)n, "test");
    os_rng_fill_uniform(x, n, key, 0, lo, hi);
    return x;
}

enum { K = 5, D = 4, HID = 8, C = 6, TS = 3, TENC = TS * K + 2 };   // 2 trailing frames are dropped

static os_proj_dims pd;
static float *w1, *b1, *w2, *b2, *cw, *cb, *x, *dout;

static os_proj_w weights(void) {   // w1 [HID, I] (I = K*D, or D after the convolution), w2 [C, HID], cw [D, D*K]
    int64_t I = cw ? D : K * D;
    return (os_proj_w){os_matf(w1, HID, I, I), b1, os_matf(w2, C, HID, HID), b2, os_matf(cw, D, D * K, D * K), cb};
}

static double loss(void) {
    float act[TS * (HID + D + K * D)], out[TS * C];
    os_proj_w w = weights();
    os_projector_fwd(&pd, &w, x, TS, act, out);
    double s = 0;
    for (int i = 0; i < TS * C; i++) s += (double)dout[i] * out[i];
    return s;
}

// out[TS, C] in double from the reference's definitions; *minpre = smallest |pre-activation| of any ReLU
static void reference(double *out, double *minpre) {
    int cov = pd.kind == OS_PROJ_COV1D, I = cov ? D : K * D;
    *minpre = 1e30;
    for (int t = 0; t < TS; t++) {
        double in[K * D], h[HID];
        for (int f = 0; f < K; f++)   // concat: frames tK .. tK+K-1 side by side
            for (int c = 0; c < D; c++) in[f * D + c] = x[(t * K + f) * D + c];
        if (cov) {                    // Conv1d(D, D, K, stride K): weight [out, in, K], then ReLU
            double y[D];
            for (int o = 0; o < D; o++) {
                y[o] = cb[o];
                for (int i = 0; i < D; i++)
                    for (int j = 0; j < K; j++) y[o] += (double)cw[(o * D + i) * K + j] * x[(t * K + j) * D + i];
                *minpre = fmin(*minpre, fabs(y[o]));
            }
            for (int o = 0; o < D; o++) in[o] = y[o] > 0 ? y[o] : 0;
        }
        for (int o = 0; o < HID; o++) {
            double s = b1[o];
            for (int i = 0; i < I; i++) s += (double)w1[o * I + i] * in[i];
            *minpre = fmin(*minpre, fabs(s));
            h[o] = s > 0 ? s : 0;
        }
        for (int o = 0; o < C; o++) {
            out[t * C + o] = b2[o];
            for (int k = 0; k < HID; k++) out[t * C + o] += (double)w2[o * HID + k] * h[k];
        }
    }
}

static void run(os_proj_kind kind) {
    pd = (os_proj_dims){K, D, HID, C, kind};
    int cov = kind == OS_PROJ_COV1D, I = cov ? D : K * D;
    const char *kn = os_proj_kind_name(kind);
    w1 = rnd(HID * I, 1, -0.3f, 0.3f), b1 = rnd(HID, 2, -0.3f, 0.3f), w2 = rnd(C * HID, 3, -0.5f, 0.5f);
    b2 = rnd(C, 4, -0.5f, 0.5f), x = rnd(TENC * D, 5, -1, 1), dout = rnd(TS * C, 6, -1, 1);
    cw = cov ? rnd(D * D * K, 7, -0.4f, 0.4f) : NULL, cb = cov ? rnd(D, 8, -0.3f, 0.3f) : NULL;
    char nm[128];

    float act[TS * (HID + D + K * D)], out[TS * C];
    os_proj_w w = weights();
    os_projector_fwd(&pd, &w, x, TS, act, out);
    double ref[TS * C], minpre, err = 0, mx = 0;
    reference(ref, &minpre);
    for (int i = 0; i < TS * C; i++) err = fmax(err, fabs(out[i] - ref[i])), mx = fmax(mx, fabs(ref[i]));
    snprintf(nm, sizeof nm, "%s: forward vs double loop (max rel)", kn);
    check(nm, err / mx <= 1e-5, err / mx, 1e-5);

    // backward vs central differences; the step stays below the smallest |pre-activation| so no ReLU kink is crossed
    float *g[6];
    int n[6] = {HID * I, HID, C * HID, C, cov ? D * D * K : 0, cov ? D : 0};
    for (int k = 0; k < 6; k++) g[k] = n[k] ? os_alloc(sizeof(float) * (size_t)n[k], "g") : NULL;
    float scratch[TS * (HID + D)];
    os_proj_g pg = {g[0], g[1], g[2], g[3], g[4], g[5]};
    os_projector_bwd(&pd, &w, x, act, dout, TS, scratch, &pg);
    float h = (float)fmin(1e-2, 0.4 * minpre);
    float *p[6] = {w1, b1, w2, b2, cw, cb};
    const char *pn[6] = {"w1", "b1", "w2", "b2", "conv w", "conv b"};
    for (int k = 0; k < 6; k++) {
        if (!n[k]) continue;
        double e = 0, m = 1e-6;
        for (int i = 0; i < n[k]; i++) {
            float v = p[k][i];
            p[k][i] = v + h;
            double lp = loss();
            p[k][i] = v - h;
            double lm = loss();
            p[k][i] = v;
            double fd = (lp - lm) / ((double)(v + h) - (double)(v - h));   // the step actually taken in float
            e = fmax(e, fabs(g[k][i] - fd)), m = fmax(m, fabs(fd));
        }
        snprintf(nm, sizeof nm, "%s: d%s vs finite differences (step %.2g, max rel)", kn, pn[k], h);
        check(nm, e / m <= 1e-4, e / m, 1e-4);
    }

    // accumulation (+=) and NULL gradients: the first gradient of the chain (conv weight or w1) only
    int f = cov ? 4 : 0;
    float *g2 = os_alloc(sizeof(float) * (size_t)n[f], "g");
    memcpy(g2, g[f], sizeof(float) * (size_t)n[f]);
    os_proj_g only = {0};
    if (cov) only.cw = g2;
    else only.w1 = g2;
    os_projector_bwd(&pd, &w, x, act, dout, TS, scratch, &only);
    double acc = 0;
    for (int i = 0; i < n[f]; i++) acc = fmax(acc, fabs(g2[i] - 2.0 * g[f][i]));
    snprintf(nm, sizeof nm, "%s: second backward adds to d%s (others NULL)", kn, pn[f]);
    check(nm, acc <= 1e-5, acc, 1e-5);
    for (int k = 0; k < 6; k++) os_free(g[k]);
    os_free(g2), os_free(w1), os_free(b1), os_free(w2), os_free(b2), os_free(x), os_free(dout), os_free(cw), os_free(cb);
}

int main(void) {
    run(OS_PROJ_LINEAR);
    run(OS_PROJ_COV1D);
    printf(nfail ? "test_projector: %d FAILED\n" : "test_projector: all passed\n", nfail);
    return nfail != 0;
}
