// Unit tests for audio loading (src/audio/audio.c), on files written here with libsndfile into a temp dir:
//  - 16-bit PCM at 16 kHz (WAV and FLAC) loads as exactly int16 / 32768, every int16 value;
//  - channels are averaged; float files keep their values;
//  - resampling: length ceil(n * 16000 / rate), a 1 kHz sine from 44.1 kHz against the analytic sine,
//    a 9 kHz tone (would alias to 7 kHz) removed;
//  - pad_or_trim; errors (missing, directory, empty, text, 0 frames, absurd rate) name the file.
#include "check.h"
#include "core/alloc.h"
#include "core/err.h"
#include "audio/audio.h"
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];

static const char *tmp_path(const char *name) {
    static char buf[4][256];
    static int k = 0;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

// writes frames [n, ch] (interleaved) as shorts or floats
static void write_file(const char *path, int format, int rate, int ch, const short *s, const float *f, int64_t n) {
    SF_INFO info = {.samplerate = rate, .channels = ch, .format = format};
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    if (!sf) {
        fprintf(stderr, "test setup: cannot write %s: %s\n", path, sf_strerror(NULL));
        exit(1);
    }
    if (n > 0) {
        sf_count_t w = s ? sf_writef_short(sf, s, n) : sf_writef_float(sf, f, n);
        if (w != n) {
            fprintf(stderr, "test setup: short write to %s\n", path);
            exit(1);
        }
    }
    sf_close(sf);
}

static void test_int16_exact(int format, const char *name) {
    const int64_t n = 65536 + 100;   // every int16 value, then a few more
    short *s = os_alloc(n * sizeof(short), "pcm");
    for (int64_t i = 0; i < n; i++) s[i] = (short)(i < 65536 ? i - 32768 : (i * 7919) % 65536 - 32768);
    const char *p = tmp_path(name);
    write_file(p, format, 16000, 1, s, NULL, n);
    float *x = NULL;
    int64_t m = 0;
    CHECK(os_audio_load_16k(p, &x, &m) == 0, "%s: %s", name, os_errmsg());
    CHECK(m == n, "%s: %lld samples, expected %lld", name, (long long)m, (long long)n);
    int64_t bad = 0;
    for (int64_t i = 0; x && i < n && i < m; i++) bad += x[i] != (float)s[i] / 32768.0f;
    CHECK(bad == 0, "%s: %lld samples differ from int16 / 32768", name, (long long)bad);
    os_free(x);
    os_free(s);
}

static void test_downmix(void) {
    const int64_t n = 1000;
    short *s = os_alloc(2 * n * sizeof(short), "stereo");
    for (int64_t i = 0; i < n; i++) {
        s[2 * i] = (short)(i * 37 % 65536 - 32768);
        s[2 * i + 1] = (short)(32767 - i * 11);
    }
    const char *p = tmp_path("stereo.wav");
    write_file(p, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 2, s, NULL, n);
    float *x = NULL;
    int64_t m = 0;
    CHECK(os_audio_load_16k(p, &x, &m) == 0 && m == n, "stereo: %s", os_errmsg());
    int64_t bad = 0;
    for (int64_t i = 0; x && i < n; i++) bad += x[i] != (float)((s[2 * i] + s[2 * i + 1]) / 65536.0);
    CHECK(bad == 0, "stereo: %lld samples are not the channel mean", (long long)bad);
    os_free(x);
    // 3-channel float file: mean of the float values
    float *f = os_alloc(3 * n * sizeof(float), "float");
    for (int64_t i = 0; i < 3 * n; i++) f[i] = (float)sin(0.01 * i) * 0.7f;
    p = tmp_path("three.wav");
    write_file(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 16000, 3, NULL, f, n);
    CHECK(os_audio_load_16k(p, &x, &m) == 0 && m == n, "3 channels: %s", os_errmsg());
    double err = 0;
    for (int64_t i = 0; x && i < n; i++) err = fmax(err, fabs(x[i] - (f[3 * i] + (double)f[3 * i + 1] + f[3 * i + 2]) / 3));
    CHECK(err < 1e-7, "3 channels: max error %g from the mean", err);
    os_free(x);
    os_free(f);
    os_free(s);
}

// SNR (dB) of y against the analytic 0.5 sin(2 pi f t) away from the first and last 100 ms
static double sine_snr(const float *y, int64_t m, double freq) {
    double sig = 0, err = 0;
    for (int64_t i = 1600; i < m - 1600; i++) {
        double r = 0.5 * sin(2 * M_PI * freq * i / 16000.0);
        sig += r * r;
        err += (y[i] - r) * (y[i] - r);
    }
    return 10 * log10(sig / err);
}

static void test_resample(void) {
    const int rate = 44100;
    const int64_t n = rate / 2 + 7;   // 0.5 s and a bit
    float *x = os_alloc(n * sizeof(float), "sine");
    for (int64_t i = 0; i < n; i++) x[i] = (float)(0.5 * sin(2 * M_PI * 1000.0 * i / rate));
    float *y = NULL;
    int64_t m = 0;
    CHECK(os_audio_resample_16k(x, n, rate, &y, &m) == 0, "resample: %s", os_errmsg());
    CHECK(m == (n * 16000 + rate - 1) / rate, "resample: length %lld", (long long)m);
    double snr = sine_snr(y, m, 1000.0);
    CHECK(snr > 80.0, "resample 44.1 kHz -> 16 kHz, 1 kHz sine: SNR %.1f dB (expected > 80)", snr);
    printf("1 kHz sine 44.1 kHz -> 16 kHz: SNR %.1f dB\n", snr);
    os_free(y);
    // 9 kHz at 44.1 kHz would fold to 7 kHz: the stop-band starts at 8 kHz
    for (int64_t i = 0; i < n; i++) x[i] = (float)(0.5 * sin(2 * M_PI * 9000.0 * i / rate));
    CHECK(os_audio_resample_16k(x, n, rate, &y, &m) == 0, "resample: %s", os_errmsg());
    double pw = 0;
    for (int64_t i = 1600; i < m - 1600; i++) pw += (double)y[i] * y[i];
    double db = 10 * log10(pw / (m - 3200) / 0.125 + 1e-30);
    CHECK(db < -80.0, "9 kHz tone after resampling to 16 kHz: %.1f dB (expected < -80)", db);
    os_free(y);
    os_free(x);
    // rates out of range
    float z[4] = {0};
    CHECK(os_audio_resample_16k(z, 4, 999, &y, &m) == -1, "rate 999 accepted");
    CHECK(os_audio_resample_16k(z, 4, 800000, &y, &m) == -1, "rate 800000 accepted");
}

static void test_load_8k(void) {   // an 8 kHz file goes through the resampler: twice the samples
    const int64_t n = 8000;
    short *s = os_alloc(n * sizeof(short), "8k");
    for (int64_t i = 0; i < n; i++) s[i] = (short)lrint(16384 * sin(2 * M_PI * 1000.0 * i / 8000.0));
    const char *p = tmp_path("rate8k.wav");
    write_file(p, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 8000, 1, s, NULL, n);
    float *y = NULL;
    int64_t m = 0;
    CHECK(os_audio_load_16k(p, &y, &m) == 0 && m == 2 * n, "8 kHz: %s (%lld samples)", os_errmsg(), (long long)m);
    if (y && m == 2 * n) {
        double snr = sine_snr(y, m, 1000.0);
        CHECK(snr > 60.0, "8 kHz -> 16 kHz 1 kHz sine: SNR %.1f dB (int16 input)", snr);
    }
    os_free(y);
    os_free(s);
}

static void test_pad_or_trim(void) {
    float *out = os_alloc(OS_AUDIO_N_SAMPLES * sizeof(float), "out");
    float shortx[3] = {1, 2, 3};
    out[5] = 9;
    os_audio_pad_or_trim(shortx, 3, out);
    int bad = out[0] != 1 || out[1] != 2 || out[2] != 3;
    for (int64_t i = 3; i < OS_AUDIO_N_SAMPLES; i++) bad |= out[i] != 0.0f;
    CHECK(!bad, "pad_or_trim: short input not zero-padded");
    int64_t n = OS_AUDIO_N_SAMPLES + 500;
    float *x = os_alloc(n * sizeof(float), "long");
    for (int64_t i = 0; i < n; i++) x[i] = (float)i;
    os_audio_pad_or_trim(x, n, out);
    bad = 0;
    for (int64_t i = 0; i < OS_AUDIO_N_SAMPLES; i++) bad |= out[i] != (float)i;
    CHECK(!bad, "pad_or_trim: long input not truncated to the first 480000 samples");
    os_free(x);
    os_free(out);
}

static void expect_error(const char *path, const char *what, const char *needle) {
    float *x = (float *)1;
    int64_t n = 7;
    int rc = os_audio_load_16k(path, &x, &n);
    CHECK(rc == -1, "%s: accepted", what);
    CHECK(x == NULL && n == 0, "%s: outputs not cleared", what);
    CHECK(strstr(os_errmsg(), path) != NULL, "%s: message does not name the file: %s", what, os_errmsg());
    CHECK(strstr(os_errmsg(), needle) != NULL, "%s: message lacks '%s': %s", what, needle, os_errmsg());
}

static void test_errors(void) {
    expect_error(tmp_path("missing.wav"), "missing file", "No such file");
    expect_error(g_dir, "directory", "directory");
    const char *p = tmp_path("empty.wav");
    FILE *f = fopen(p, "wb");
    fclose(f);
    expect_error(p, "empty file", "empty");
    p = tmp_path("text.wav");
    f = fopen(p, "wb");
    fputs("this is not audio, just text in a file named .wav\n", f);
    fclose(f);
    expect_error(p, "text file", "not a readable audio file");
    p = tmp_path("noframes.wav");
    write_file(p, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, NULL, NULL, 0);
    expect_error(p, "0-frame wav", "no audio samples");
    short s[16] = {0};
    p = tmp_path("rate500.wav");
    write_file(p, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 500, 1, s, NULL, 16);
    expect_error(p, "500 Hz wav", "sample rate 500");
}

int main(void) {
    strcpy(g_dir, "/tmp/test_audio.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_int16_exact(SF_FORMAT_WAV | SF_FORMAT_PCM_16, "pcm16.wav");
    test_int16_exact(SF_FORMAT_FLAC | SF_FORMAT_PCM_16, "pcm16.flac");
    test_downmix();
    test_resample();
    test_load_8k();
    test_pad_or_trim();
    test_errors();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", g_dir);
    return check_report("test_audio");
}
