// Audio file -> 16 kHz mono float: libsndfile decoding, channel mean, Kaiser-windowed sinc resampler.
#include "audio/audio.h"
#include "core/alloc.h"
#include "core/err.h"
#include <errno.h>
#include <math.h>
#include <sndfile.h>
#include <string.h>
#include <sys/stat.h>

#define RATE_MIN 1000
#define RATE_MAX 768000
#define MAX_FRAMES ((int64_t)1 << 30)   // about 18 h at 16 kHz: more means a broken header
#define MAX_CHANNELS 256
#define CHUNK_FRAMES 16384

// ---- resampler design (docs/audio.md) ----
// Band edges relative to nyq = min(rate_in, 16000) / 2: pass-band up to 0.9 nyq, stop-band from nyq, so no
// component at or above 8 kHz aliases into the output. Kaiser design for ATTEN_DB of stop-band attenuation
// (and the same relative ripple, 10^(-ATTEN_DB/20), in the pass-band).
#define ATTEN_DB 90.0
#define PASS_FRAC 0.9
#define PHASES 512   // kernel table entries per input sample; linear interpolation between them

static double bessel_i0(double x) {   // power series; converges fast for the x <= 10 used here
    double sum = 1.0, term = 1.0, q = x * x / 4.0;
    for (int k = 1; k < 200 && term > 1e-17 * sum; k++) {
        term *= q / ((double)k * k);
        sum += term;
    }
    return sum;
}

// Kernel h[d] sampled at d = i / PHASES input samples, i = 0..len-1 (h is even; zero past the half-width).
// Continuous form: h(d) = (2 fc / R) sinc(2 fc d / R) * kaiser(d / half), fc the -6 dB cutoff in Hz.
static float *make_kernel(int rate_in, double *half_out, int64_t *len_out) {
    double nyq = 0.5 * (rate_in < OS_AUDIO_RATE ? rate_in : OS_AUDIO_RATE);
    double df = (1.0 - PASS_FRAC) * nyq;                   // transition width, Hz
    double fc = 0.5 * (1.0 + PASS_FRAC) * nyq;             // cutoff, Hz
    double beta = 0.1102 * (ATTEN_DB - 8.7);               // Kaiser's formula for A > 50 dB
    // taps N = (A - 8) / (2.285 * 2 pi df / R): half-width N / 2 input samples
    double half = (ATTEN_DB - 8.0) / (2.285 * 2.0 * M_PI * df / rate_in) / 2.0;
    int64_t len = (int64_t)ceil(half * PHASES) + 2;
    float *h = os_alloc((size_t)len * sizeof(float), "resampler kernel");
    double i0b = bessel_i0(beta), g = 2.0 * fc / rate_in;
    for (int64_t i = 0; i < len; i++) {
        double d = (double)i / PHASES, u = d / half;
        if (u >= 1.0) break;   // the rest stays zero
        double x = g * d, sinc = x == 0.0 ? 1.0 : sin(M_PI * x) / (M_PI * x);
        h[i] = (float)(g * sinc * bessel_i0(beta * sqrt(1.0 - u * u)) / i0b);
    }
    *half_out = half;
    *len_out = len;
    return h;
}

int os_audio_resample_16k(const float *x, int64_t n, int rate_in, float **out, int64_t *n_out) {
    if (rate_in < RATE_MIN || rate_in > RATE_MAX)
        return os_errf("sample rate %d Hz is outside the supported range [%d, %d] Hz", rate_in, RATE_MIN, RATE_MAX);
    int64_t m = (n * OS_AUDIO_RATE + rate_in - 1) / rate_in;
    float *y = os_alloc((size_t)(m > 0 ? m : 1) * sizeof(float), "resampled audio");
    if (rate_in == OS_AUDIO_RATE) {
        if (n > 0) memcpy(y, x, (size_t)n * sizeof(float));
        *out = y;
        *n_out = m;
        return 0;
    }
    double half;
    int64_t len;
    float *h = make_kernel(rate_in, &half, &len);
    int64_t reach = (int64_t)half + 1;   // input samples on each side of the output instant
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; i++) {
        // output instant t = i * rate_in / 16000 input samples = j0 + frac (exact integer split)
        int64_t num = i * rate_in, j0 = num / OS_AUDIO_RATE;
        double frac = (double)(num % OS_AUDIO_RATE) / OS_AUDIO_RATE;
        double acc = 0.0;
        // left taps j = j0 - k at distance frac + k; right taps j = j0 + 1 + k at distance 1 - frac + k:
        // on each side the table position steps by exactly PHASES, so the interpolation weight is fixed.
        for (int side = 0; side < 2; side++) {
            double p = (side == 0 ? frac : 1.0 - frac) * PHASES;
            int64_t idx = (int64_t)p;
            float a = (float)(p - (double)idx);
            for (int64_t k = 0; k <= reach && idx + 1 < len; k++, idx += PHASES) {
                int64_t j = side == 0 ? j0 - k : j0 + 1 + k;
                if (j < 0 || j >= n) continue;
                float w = h[idx] + a * (h[idx + 1] - h[idx]);
                acc += (double)w * x[j];
            }
        }
        y[i] = (float)acc;
    }
    os_free(h);
    *out = y;
    *n_out = m;
    return 0;
}

// Reads every frame of an open file as the channel mean. 8/16-bit PCM goes through shorts so that a sample
// becomes exactly int16 / 32768; other encodings through libsndfile's normalised floats.
static int read_mono(SNDFILE *sf, const char *path, int ch, int64_t frames, int as_short, float *mono, int64_t *got) {
    void *buf = os_alloc((size_t)CHUNK_FRAMES * (size_t)ch * (as_short ? sizeof(short) : sizeof(float)), "audio chunk");
    int64_t done = 0;
    while (done < frames) {
        sf_count_t want = frames - done < CHUNK_FRAMES ? frames - done : CHUNK_FRAMES;
        sf_count_t r = as_short ? sf_readf_short(sf, buf, want) : sf_readf_float(sf, buf, want);
        if (r <= 0) break;
        for (sf_count_t f = 0; f < r; f++) {
            double s = 0.0;
            if (as_short) {
                const short *b = (const short *)buf + f * ch;
                for (int c = 0; c < ch; c++) s += b[c];
                mono[done + f] = (float)(s / (32768.0 * ch));
            } else {
                const float *b = (const float *)buf + f * ch;
                for (int c = 0; c < ch; c++) s += b[c];
                mono[done + f] = (float)(s / ch);
            }
        }
        done += r;
    }
    os_free(buf);
    if (sf_error(sf) != SF_ERR_NO_ERROR)
        return os_errf("%s: read error after %lld of %lld frames: %s", path, (long long)done, (long long)frames,
                       sf_strerror(sf));
    if (done == 0) return os_errf("%s: no audio samples could be read (header announces %lld frames)", path,
                                  (long long)frames);
    *got = done;
    return 0;
}

// open path for reading after the checks every audio input must pass; NULL + message naming the file
static SNDFILE *open_checked(const char *path, SF_INFO *info) {
    struct stat st;
    if (stat(path, &st) != 0) return os_errf("%s: cannot open audio file: %s", path, strerror(errno)), NULL;
    if (S_ISDIR(st.st_mode)) return os_errf("%s: is a directory, expected an audio file", path), NULL;
    if (st.st_size == 0) return os_errf("%s: empty file (0 bytes), expected audio", path), NULL;
    memset(info, 0, sizeof *info);
    SNDFILE *sf = sf_open(path, SFM_READ, info);
    if (!sf) return os_errf("%s: not a readable audio file (libsndfile: %s)", path, sf_strerror(NULL)), NULL;
    int rc = 0;
    if (info->frames <= 0) rc = os_errf("%s: contains no audio samples (0 frames)", path);
    else if (info->frames > MAX_FRAMES)
        rc = os_errf("%s: too long: %lld frames (at most %lld)", path, (long long)info->frames, (long long)MAX_FRAMES);
    else if (info->channels < 1 || info->channels > MAX_CHANNELS)
        rc = os_errf("%s: unsupported channel count %d (expected 1..%d)", path, info->channels, MAX_CHANNELS);
    else if (info->samplerate < RATE_MIN || info->samplerate > RATE_MAX)
        rc = os_errf("%s: sample rate %d Hz is outside the supported range [%d, %d] Hz", path, info->samplerate,
                     RATE_MIN, RATE_MAX);
    if (rc) {
        sf_close(sf);
        return NULL;
    }
    return sf;
}

int os_audio_check(const char *path) {
    SF_INFO info;
    SNDFILE *sf = open_checked(path, &info);
    if (!sf) return -1;
    sf_close(sf);
    return 0;
}

int os_audio_load_16k(const char *path, float **samples, int64_t *n) {
    *samples = NULL;
    *n = 0;
    SF_INFO info;
    SNDFILE *sf = open_checked(path, &info);
    if (!sf) return -1;
    int rc = 0;
    int sub = info.format & SF_FORMAT_SUBMASK;
    int as_short = sub == SF_FORMAT_PCM_16 || sub == SF_FORMAT_PCM_S8 || sub == SF_FORMAT_PCM_U8;
    sf_command(sf, SFC_SET_NORM_FLOAT, NULL, SF_TRUE);
    float *mono = os_alloc((size_t)info.frames * sizeof(float), "decoded audio");
    int64_t got = 0;
    rc = read_mono(sf, path, info.channels, info.frames, as_short, mono, &got);
    sf_close(sf);
    if (rc) {
        os_free(mono);
        return rc;
    }
    if (info.samplerate == OS_AUDIO_RATE) {
        *samples = mono;
        *n = got;
        return 0;
    }
    rc = os_audio_resample_16k(mono, got, info.samplerate, samples, n);
    os_free(mono);
    return rc ? os_err_ctx("%s", path) : 0;
}

void os_audio_pad_or_trim(const float *x, int64_t n, float *out) {
    int64_t k = n < OS_AUDIO_N_SAMPLES ? (n > 0 ? n : 0) : OS_AUDIO_N_SAMPLES;
    if (k > 0) memcpy(out, x, (size_t)k * sizeof(float));
    if (k < OS_AUDIO_N_SAMPLES) memset(out + k, 0, (size_t)(OS_AUDIO_N_SAMPLES - k) * sizeof(float));
}
