// k_expf (src/kernels/vexp.h) against libm's exp in double rounded to float: a sweep over every 61st float bit
// pattern in [-104, 89] (about 35 M arguments), in ulps of the reference for normal results and in units of the
// smallest subnormal below FLT_MIN; the special values; and the vectorised loop against the scalar call.
#include "kernels/vexp.h"
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// distance between two finite floats of the same sign in representable steps
static double ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4), memcpy(&ib, &b, 4);
    return fabs((double)ia - (double)ib);
}

int main(void) {
    int fail = 0;
    double worst = 0, worst_sub = 0;
    float at = 0, at_sub = 0;
    int64_t n = 0;
    enum { CHUNK = 4096 };
    static float xs[CHUNK], ys[CHUNK];
    int m = 0;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t u = 0; u < 0x7F800000u; u += 61) {
            float x = from_bits(u | sign << 31);
            if (x < -104.0f || x > 89.0f) continue;
            xs[m++] = x;
            if (m < CHUNK && !(u + 61 >= 0x7F800000u)) continue;
#pragma omp simd
            for (int i = 0; i < m; i++) ys[i] = k_expf(xs[i]);
            for (int i = 0; i < m; i++, n++) {
                float ref = (float)exp((double)xs[i]);
                if (ys[i] != k_expf(xs[i])) fail = 1, printf("FAIL vector != scalar at %a\n", xs[i]);
                if (isinf(ref) || isinf(ys[i])) {
                    if (ys[i] != ref) fail = 1, printf("FAIL exp(%a) = %a, libm %a\n", xs[i], ys[i], ref);
                    continue;
                }
                double e = ulps(ys[i], ref);
                if (ref < FLT_MIN) {
                    if (e > worst_sub) worst_sub = e, at_sub = xs[i];
                } else if (e > worst) worst = e, at = xs[i];
            }
            m = 0;
        }
    printf("%s k_expf: %lld arguments, max %.0f ulp (at %a), subnormal results max %.0f units (at %a)\n",
           worst <= 2 && worst_sub <= 1 ? "ok  " : "FAIL", (long long)n, worst, at, worst_sub, at_sub);
    fail |= !(worst <= 2 && worst_sub <= 1);
    float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.72283f, 88.7229f, -103.972f, -150.0f, 1e30f, -1e30f};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        float y = k_expf(sp[i]), ref = (float)exp((double)sp[i]);
        int ok = (isnan(ref) && isnan(y)) || y == ref || (!isinf(ref) && ulps(y, ref) <= 2);
        printf("%s k_expf(%a) = %a (libm %a)\n", ok ? "ok  " : "FAIL", sp[i], y, ref);
        fail |= !ok;
    }
    return fail;
}
