// Whisper log-mel spectrogram: mel filter bank (librosa's Slaney formulas, reproduced bit for bit), a real DFT
// done as one sgemm of the windowed frames against a cos/sin table, and Whisper's log/clamp/scale.
#include "audio/logmel.h"
#include "core/alloc.h"
#include "core/err.h"
#include <cblas.h>
#include <math.h>
#include <pthread.h>

// ---- mel filters ----
// librosa hz_to_mel / mel_to_hz, Slaney: linear below 1 kHz (200/3 Hz per mel), logarithmic above.
// The constants are computed the way librosa computes them so that the doubles agree to the last bit.
static const double F_SP = 200.0 / 3.0, MIN_LOG_HZ = 1000.0;
static double min_log_mel(void) { return MIN_LOG_HZ / F_SP; }
static double logstep(void) { return log(6.4) / 27.0; }

static double hz_to_mel(double f) {
    if (f >= MIN_LOG_HZ) return min_log_mel() + log(f / MIN_LOG_HZ) / logstep();
    return f / F_SP;
}

static double mel_to_hz(double m) {
    if (m >= min_log_mel()) return MIN_LOG_HZ * exp(logstep() * (m - min_log_mel()));
    return F_SP * m;
}

void os_mel_filters(float *f, int n_mels) {
    const int nb = OS_MEL_N_BINS;
    double *mel_f = os_alloc((size_t)(n_mels + 2) * sizeof(double), "mel band edges");
    // numpy linspace(0, max_mel, n_mels + 2): i * step with step = max_mel / (n_mels + 1), last = max_mel
    double max_mel = hz_to_mel(8000.0), step = max_mel / (n_mels + 1);
    for (int i = 0; i < n_mels + 2; i++) mel_f[i] = mel_to_hz(i == n_mels + 1 ? max_mel : i * step);
    double bin_hz = 1.0 / (OS_MEL_N_FFT * (1.0 / 16000.0));   // numpy rfftfreq: k / (n * d)
    for (int i = 0; i < n_mels; i++) {
        double lo = mel_f[i + 1] - mel_f[i], hi = mel_f[i + 2] - mel_f[i + 1];
        double enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
        for (int k = 0; k < nb; k++) {
            double fk = k * bin_hz;
            // librosa: lower = -(mel_f[i] - fk) / lo; at fk = mel_f[0] = 0 that is -0.0, and numpy's
            // maximum(0, -0.0) keeps -0.0: the sign of that zero is part of the published bytes.
            double a = -(mel_f[i] - fk) / lo, b = (mel_f[i + 2] - fk) / hi;
            double mn = a < b ? a : b, w = mn < 0.0 ? 0.0 : mn;
            f[(int64_t)i * nb + k] = (float)((double)(float)w * enorm);   // librosa: float32 array, *= enorm
        }
    }
    os_free(mel_f);
}

// ---- DFT table ----
// basis[m, k] = w[m] cos(2 pi k m / 400), basis[m, 201 + k] = -w[m] sin(2 pi k m / 400), m < 400, k < 201,
// w the periodic Hann window 0.5 - 0.5 cos(2 pi m / 400). Angles reduced exactly as (k m) mod 400.
#define NB2 (2 * OS_MEL_N_BINS)
static float g_basis[OS_MEL_N_FFT * NB2];
static pthread_once_t g_basis_once = PTHREAD_ONCE_INIT;

static void make_basis(void) {
    const int N = OS_MEL_N_FFT;
    for (int m = 0; m < N; m++) {
        double w = 0.5 - 0.5 * cos(2.0 * M_PI * m / N);
        for (int k = 0; k < OS_MEL_N_BINS; k++) {
            double a = 2.0 * M_PI * (double)((k * m) % N) / N;
            g_basis[m * NB2 + k] = (float)(w * cos(a));
            g_basis[m * NB2 + OS_MEL_N_BINS + k] = (float)(-w * sin(a));
        }
    }
}

int os_log_mel(const float *wave, int64_t n, int n_mels, float *out) {
    const int64_t N = OS_MEL_N_FFT, half = N / 2, nb = OS_MEL_N_BINS;
    if (n <= half) return os_errf("log-mel: %lld samples is too short (reflect padding needs more than %lld)",
                                  (long long)n, (long long)half);
    if (n_mels < 1) return os_errf("log-mel: n_mels must be >= 1 (got %d)", n_mels);
    pthread_once(&g_basis_once, make_basis);
    const int64_t T = n / OS_MEL_HOP;   // 1 + n/160 STFT frames, the last one dropped
    // frames[T, 400]: frame t covers samples [160 t - 200, 160 t + 200) of the reflect-padded wave
    float *frames = os_alloc((size_t)(T * N) * sizeof(float), "STFT frames");
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        float *fr = frames + t * N;
        int64_t s0 = t * OS_MEL_HOP - half;
        for (int64_t m = 0; m < N; m++) {
            int64_t q = s0 + m;
            if (q < 0) q = -q;
            else if (q >= n) q = 2 * (n - 1) - q;
            fr[m] = wave[q];
        }
    }
    // spec[T, 402] = frames @ basis: real parts in columns 0..200, imaginary parts in 201..401
    float *spec = os_alloc((size_t)(T * NB2) * sizeof(float), "STFT");
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, NB2, (int)N, 1.0f, frames, (int)N, g_basis, NB2,
                0.0f, spec, NB2);
    os_free(frames);
    // power |X|^2 in place: spec[t, k] for k < 201 (row stride stays 402)
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        float *r = spec + t * NB2;
        for (int64_t k = 0; k < nb; k++) r[k] = r[k] * r[k] + r[nb + k] * r[nb + k];
    }
    // out[n_mels, T] = filters[n_mels, 201] @ power[T, 201]^T
    float *filt = os_alloc((size_t)n_mels * nb * sizeof(float), "mel filters");
    os_mel_filters(filt, n_mels);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_mels, (int)T, (int)nb, 1.0f, filt, (int)nb, spec, NB2, 0.0f,
                out, (int)T);
    os_free(filt);
    os_free(spec);
    const int64_t total = (int64_t)n_mels * T;
    float mx = -INFINITY;
#pragma omp parallel for schedule(static) reduction(max : mx)
    for (int64_t i = 0; i < total; i++) {
        float v = log10f(out[i] > 1e-10f ? out[i] : 1e-10f);
        out[i] = v;
        if (v > mx) mx = v;
    }
    const float floor_v = mx - 8.0f;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < total; i++) out[i] = ((out[i] > floor_v ? out[i] : floor_v) + 4.0f) / 4.0f;
    return 0;
}
