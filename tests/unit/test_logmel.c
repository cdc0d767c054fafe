// Unit tests for the Whisper log-mel front end (src/audio/logmel.c):
//  - the mel filter banks hash to the published sha256 of openai-whisper's mel_filters.npz (80 and 128 mels);
//  - 30 s of silence gives -1.5 everywhere;
//  - a short random signal matches a direct double-precision evaluation of the formulas (no FFT, no BLAS);
//  - bad sizes are refused with a message. Prints the 30 s throughput.
#include "check.h"
#include "core/alloc.h"
#include "core/cpu.h"
#include "core/err.h"
#include "core/timer.h"
#include "audio/audio.h"
#include "audio/logmel.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// ---- SHA-256 (FIPS 180-4), enough for hashing a buffer in one call ----
static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64], a[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(a, h, sizeof a);
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = rotr(a[4], 6) ^ rotr(a[4], 11) ^ rotr(a[4], 25), ch = (a[4] & a[5]) ^ (~a[4] & a[6]);
        uint32_t t1 = a[7] + S1 + ch + K256[i] + w[i];
        uint32_t S0 = rotr(a[0], 2) ^ rotr(a[0], 13) ^ rotr(a[0], 22), mj = (a[0] & a[1]) ^ (a[0] & a[2]) ^ (a[1] & a[2]);
        memmove(a + 1, a, 7 * sizeof(uint32_t));
        a[4] += t1;
        a[0] = t1 + S0 + mj;
    }
    for (int i = 0; i < 8; i++) h[i] += a[i];
}

static void sha256_hex(const void *data, size_t n, char hex[65]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const unsigned char *p = data;
    size_t full = n / 64 * 64;
    for (size_t i = 0; i < full; i += 64) sha256_block(h, p + i);
    unsigned char tail[128] = {0};
    size_t r = n - full, tl = r < 56 ? 64 : 128;
    memcpy(tail, p + full, r);
    tail[r] = 0x80;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++) tail[tl - 1 - i] = (unsigned char)(bits >> (8 * i));
    for (size_t i = 0; i < tl; i += 64) sha256_block(h, tail + i);
    for (int i = 0; i < 8; i++) sprintf(hex + 8 * i, "%08x", h[i]);
}

static void test_sha256_itself(void) {   // FIPS 180-4 examples: one block and two blocks
    char hex[65];
    sha256_hex("abc", 3, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "sha256(abc) = %s", hex);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex(two, strlen(two), hex);
    CHECK(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "sha256(2 blocks) = %s", hex);
}

// ---- filters ----
static void test_filters(int n_mels, const char *want_sha, int want_nonzero) {
    float *f = os_alloc((size_t)n_mels * OS_MEL_N_BINS * sizeof(float), "filters");
    os_mel_filters(f, n_mels);
    char hex[65];
    sha256_hex(f, (size_t)n_mels * OS_MEL_N_BINS * sizeof(float), hex);   // x86: already little-endian
    CHECK(!strcmp(hex, want_sha), "mel filters %d: sha256 %s, expected %s", n_mels, hex, want_sha);
    int nz = 0, col200 = 0;
    for (int i = 0; i < n_mels; i++) {
        for (int k = 0; k < OS_MEL_N_BINS; k++) nz += f[i * OS_MEL_N_BINS + k] != 0.0f;
        col200 += f[i * OS_MEL_N_BINS + 200] != 0.0f;
    }
    if (want_nonzero > 0) CHECK(nz == want_nonzero, "mel filters %d: %d non-zeros, expected %d", n_mels, nz, want_nonzero);
    CHECK(col200 == 0, "mel filters %d: column 200 (8 kHz) has %d non-zeros", n_mels, col200);
    os_free(f);
}

// ---- direct double-precision reference of the formulas, for a short signal ----
static void ref_log_mel(const float *x, int64_t n, int n_mels, double *out) {
    const int64_t T = n / 160;
    float *f = os_alloc((size_t)n_mels * OS_MEL_N_BINS * sizeof(float), "filters");
    os_mel_filters(f, n_mels);   // checked bit-exact above
    double *pw = os_alloc(OS_MEL_N_BINS * sizeof(double), "power");
    double mx = -1e300;
    for (int64_t t = 0; t < T; t++) {
        for (int k = 0; k < OS_MEL_N_BINS; k++) {
            double re = 0, im = 0;
            for (int m = 0; m < 400; m++) {
                int64_t q = 160 * t - 200 + m;
                q = q < 0 ? -q : q >= n ? 2 * (n - 1) - q : q;
                double v = x[q] * (0.5 - 0.5 * cos(2 * M_PI * m / 400.0)), a = 2 * M_PI * (double)k * m / 400.0;
                re += v * cos(a);
                im -= v * sin(a);
            }
            pw[k] = re * re + im * im;
        }
        for (int i = 0; i < n_mels; i++) {
            double s = 0;
            for (int k = 0; k < OS_MEL_N_BINS; k++) s += f[i * OS_MEL_N_BINS + k] * pw[k];
            double l = log10(s > 1e-10 ? s : 1e-10);
            out[i * T + t] = l;
            if (l > mx) mx = l;
        }
    }
    for (int64_t i = 0; i < n_mels * T; i++) out[i] = ((out[i] > mx - 8 ? out[i] : mx - 8) + 4) / 4;
    os_free(pw);
    os_free(f);
}

static void test_against_direct(int n_mels) {
    const int64_t n = 4321;   // 27 frames; not a multiple of the hop
    const int64_t T = n / 160;
    float *x = os_alloc(n * sizeof(float), "x");
    uint64_t s = 12345;
    for (int64_t i = 0; i < n; i++) {   // a chirp plus LCG noise, with a quiet stretch (dynamic range)
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double noise = ((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.02;
        double amp = i > 2000 && i < 2600 ? 1e-4 : 0.5;
        x[i] = (float)(amp * sin(2 * M_PI * (100.0 + 0.9 * i) * i / 16000.0) + noise);
    }
    float *got = os_alloc((size_t)(n_mels * T) * sizeof(float), "got");
    double *want = os_alloc((size_t)(n_mels * T) * sizeof(double), "want");
    CHECK(os_log_mel(x, n, n_mels, got) == 0, "os_log_mel failed: %s", os_errmsg());
    ref_log_mel(x, n, n_mels, want);
    double err = 0;
    for (int64_t i = 0; i < n_mels * T; i++) err = fmax(err, fabs(got[i] - want[i]));
    CHECK(err <= 1e-4, "log-mel %d vs direct double evaluation: max abs error %.3g > 1e-4", n_mels, err);
    printf("log-mel [%d, %lld] vs direct double DFT: max abs error %.2g\n", n_mels, (long long)T, err);
    os_free(x);
    os_free(got);
    os_free(want);
}

static void test_silence_and_speed(void) {
    float *x = os_alloc(OS_AUDIO_N_SAMPLES * sizeof(float), "silence");
    float *mel = os_alloc(80 * 3000 * sizeof(float), "mel");
    CHECK(os_log_mel(x, OS_AUDIO_N_SAMPLES, 80, mel) == 0, "silence: %s", os_errmsg());
    int bad = 0;
    for (int i = 0; i < 80 * 3000; i++) bad += mel[i] != -1.5f;
    CHECK(bad == 0, "silence: %d of 240000 values differ from -1.5 (e.g. %g)", bad, mel[0]);
    for (int64_t i = 0; i < OS_AUDIO_N_SAMPLES; i++) x[i] = (float)(0.3 * sin(0.05 * i) + 0.1 * sin(1.3 * i));
    const int reps = 3;
    double t0 = os_now();
    for (int r = 0; r < reps; r++) os_log_mel(x, OS_AUDIO_N_SAMPLES, 80, mel);
    double dt = (os_now() - t0) / reps;
    printf("log-mel of 30 s (480000 samples -> [80, 3000]): %.1f ms per call\n", dt * 1e3);
    os_free(x);
    os_free(mel);
}

static void test_errors(void) {
    float x[201] = {0}, out[80];
    CHECK(os_log_mel(x, 200, 80, out) == -1 && strstr(os_errmsg(), "too short"), "n=200 accepted: %s", os_errmsg());
    CHECK(os_log_mel(x, 201, 0, out) == -1 && strstr(os_errmsg(), "n_mels"), "n_mels=0 accepted: %s", os_errmsg());
    CHECK(os_log_mel(x, 201, 80, out) == 0, "n=201 refused: %s", os_errmsg());   // 1 frame, reflect pad fits
}

int main(int argc, char **argv) {
    os_cpu_setup(argc, argv);
    test_sha256_itself();
    test_filters(80, "4f2701b1d287d74a0dc9871026e9519d98cb76426615f2539b0d151a0ae4ec2e", 391);
    test_filters(128, "2a5f9822897750e047c85dea37cc268d3be0ecfd23c28a5f10da129d99d05afe", 0);
    test_against_direct(80);
    test_against_direct(128);
    test_silence_and_speed();
    test_errors();
    return check_report("test_logmel");
}
