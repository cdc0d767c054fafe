// k_expf(x): e^x in float without libm, branch-free so that `#pragma omp simd` loops vectorise it (AVX2 / AVX-512
// with -march=native; plain SSE otherwise). Error within 2 ulp of the correctly rounded value over the normal range
// (tests/unit/test_vexp.c sweeps it against libm's exp in double); results below FLT_MIN are subnormal with one
// rounding, under about -103.97 they are 0, above 88.72 +inf; NaN gives NaN.
// Method: x = n ln2 + r with n = round(x / ln2) and |r| <= ln2/2 (ln2 split in two so n*ln2_hi is exact); e^r by
// its Taylor series to r^7 (truncation below 0.1 ulp on that interval); 2^n applied as two powers of two
// 2^(n/2) * 2^(n - n/2) built from exponent bits, so every n in [-150, 128] stays exact until the final product.
#pragma once
#include <stdint.h>
#include <string.h>

#ifdef __FMA__
#define K_FMA(a, b, c) __builtin_fmaf(a, b, c)
#else
#define K_FMA(a, b, c) ((a) * (b) + (c))
#endif

static inline float k_pow2i(int32_t k) {   // 2^k for k in [-126, 127]
    uint32_t u = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#pragma omp declare simd notinbranch
static inline float k_expf(float x) {
    const float log2e = 1.44269504088896341f, ln2_hi = 0.693145751953125f, ln2_lo = 1.42860682030941723e-6f;
    const float shifter = 12582912.0f;   // 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits
    float xc = x < -104.0f ? -104.0f : x > 89.0f ? 89.0f : x;
    float t = K_FMA(xc, log2e, shifter), n = t - shifter;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    int32_t k = (int32_t)(tb - 0x4B400000u);   // n as an integer (t's bits minus the shifter's)
    float r = K_FMA(-n, ln2_hi, xc);
    r = K_FMA(-n, ln2_lo, r);
    float p = 1.0f / 5040.0f;
    p = K_FMA(p, r, 1.0f / 720.0f);
    p = K_FMA(p, r, 1.0f / 120.0f);
    p = K_FMA(p, r, 1.0f / 24.0f);
    p = K_FMA(p, r, 1.0f / 6.0f);
    p = K_FMA(p, r, 0.5f);
    p = K_FMA(p, r * r, r);   // r + r^2 (1/2 + r/6 + ...)
    p = p + 1.0f;
    int32_t k1 = k >> 1;
    float y = p * k_pow2i(k1) * k_pow2i(k - k1);
    return x != x ? x : y;
}
