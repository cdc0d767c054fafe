// Unit test of the speech projector (src/model/projector.c): forward against a direct double loop of the concat-k
// rule (including dropped trailing frames), backward against central finite differences of
// L = sum(dout * fwd(params)) for every coordinate of w1, b1, w2, b2, and the accumulate / NULL-gradient rules.
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

static float *w1, *b1, *w2, *b2, *x, *dout;

static double loss(void) {
    float a[TS * HID], out[TS * C];
    os_proj_dims p = {K, D, HID, C};
    os_projector_fwd(&p, w1, b1, w2, b2, x, TS, a, out);
    double s = 0;
    for (int i = 0; i < TS * C; i++) s += (double)dout[i] * out[i];
    return s;
}

int main(void) {
    int64_t I = K * D;
    w1 = rnd(HID * I, 1, -0.3f, 0.3f), b1 = rnd(HID, 2, -0.3f, 0.3f), w2 = rnd(C * HID, 3, -0.5f, 0.5f);
    b2 = rnd(C, 4, -0.5f, 0.5f), x = rnd(TENC * D, 5, -1, 1), dout = rnd(TS * C, 6, -1, 1);
    os_proj_dims p = {K, D, HID, C};

    // forward vs the concat rule in double: row j = frames jK .. jK+K-1 side by side
    float a[TS * HID], out[TS * C];
    os_projector_fwd(&p, w1, b1, w2, b2, x, TS, a, out);
    double err = 0, mx = 0, minpre = 1e30;
    for (int j = 0; j < TS; j++) {
        double h[HID];
        for (int o = 0; o < HID; o++) {
            double s = b1[o];
            for (int f = 0; f < K; f++)
                for (int c = 0; c < D; c++) s += (double)w1[o * I + f * D + c] * x[(j * K + f) * D + c];
            minpre = fmin(minpre, fabs(s));
            h[o] = s > 0 ? s : 0;
        }
        for (int o = 0; o < C; o++) {
            double s = b2[o];
            for (int k = 0; k < HID; k++) s += (double)w2[o * HID + k] * h[k];
            err = fmax(err, fabs(out[j * C + o] - s)), mx = fmax(mx, fabs(s));
        }
    }
    check("forward vs double concat-k loop (max rel)", err / mx <= 1e-5, err / mx, 1e-5);

    // backward vs central differences; the step stays below the smallest |pre-activation| so no ReLU kink is crossed
    float *dw1 = os_alloc(sizeof(float) * (size_t)(HID * I), "g"), *db1 = os_alloc(sizeof(float) * HID, "g");
    float *dw2 = os_alloc(sizeof(float) * (size_t)(C * HID), "g"), *db2 = os_alloc(sizeof(float) * C, "g");
    float da[TS * HID];
    os_projector_bwd(&p, w2, x, a, dout, TS, da, dw1, db1, dw2, db2);
    float h = (float)fmin(1e-2, 0.4 * minpre);
    struct {
        const char *name;
        float *p, *g;
        int n;
    } t[] = {{"w1", w1, dw1, HID * (int)I}, {"b1", b1, db1, HID}, {"w2", w2, dw2, C * HID}, {"b2", b2, db2, C}};
    for (int k = 0; k < 4; k++) {
        double e = 0, m = 1e-6;
        for (int i = 0; i < t[k].n; i++) {
            float v = t[k].p[i];
            t[k].p[i] = v + h;
            double lp = loss();
            t[k].p[i] = v - h;
            double lm = loss();
            t[k].p[i] = v;
            double fd = (lp - lm) / ((double)(v + h) - (double)(v - h));   // the step actually taken in float
            e = fmax(e, fabs(t[k].g[i] - fd)), m = fmax(m, fabs(fd));
        }
        char nm[64];
        snprintf(nm, sizeof nm, "d%s vs finite differences (step %.2g, max rel)", t[k].name, h);
        check(nm, e / m <= 1e-4, e / m, 1e-4);
    }

    // accumulation (+=) and NULL gradients
    float *g2 = os_alloc(sizeof(float) * (size_t)(HID * I), "g");
    memcpy(g2, dw1, sizeof(float) * (size_t)(HID * I));
    os_projector_bwd(&p, w2, x, a, dout, TS, da, g2, NULL, NULL, NULL);
    double acc = 0;
    for (int i = 0; i < HID * I; i++) acc = fmax(acc, fabs(g2[i] - 2.0 * dw1[i]));
    check("second backward adds to dw1 (others NULL)", acc <= 1e-5, acc, 1e-5);

    printf(nfail ? "test_projector: %d FAILED\n" : "test_projector: all passed\n", nfail);
    return nfail != 0;
}
