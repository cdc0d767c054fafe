// omnishard mel: Whisper log-mel spectrogram of an audio file, written as safetensors or raw float32.
#include "cli/commands.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/opts.h"
#include "core/timer.h"
#include "audio/audio.h"
#include "audio/logmel.h"
#include "io/safetensors.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *USAGE =
    "usage: omnishard mel --wav FILE --out OUT [--n_mels 80] [--no-pad] [--bench N]\n"
    "       omnishard mel --wav FILE --dump-audio OUT     (the 16 kHz mono samples, tensor \"audio\" [n])\n"
    "       omnishard mel --filters --out OUT [--n_mels 80] (the mel filter bank, tensor \"filters\" [n_mels, 201])\n"
    "       omnishard mel --encoder DIR ...              (the Whisper encoder's output: omnishard mel --encoder x --help)\n"
    "OUT ending in .safetensors: one F32 tensor (\"mel\" [n_mels, frames] for a spectrogram); any other name:\n"
    "raw little-endian float32, row-major. The shape is printed on stdout (\"ROWS COLS\", or \"N\" for audio).\n"
    "By default the audio is padded or trimmed to 30 s first (as Whisper/SLAM-LLM do): [n_mels, 3000].\n"
    "--no-pad: the spectrogram of the whole file, [n_mels, n_samples / 160]. --bench N: time N log-mel runs.\n";

typedef struct {
    const char *wav, *out, *dump;
    int n_mels, filters, no_pad, bench;
} mel_args;

#define F(n) .off = offsetof(mel_args, n)
static const os_opt OPTS[] = {
    {.name = "wav", F(wav), .type = OS_OPT_STR, .help = "the audio file (WAV, FLAC, ...: what libsndfile reads)"},
    {.name = "out", F(out), .type = OS_OPT_STR, .help = "the spectrogram (or --filters' filter bank) to write"},
    {.name = "dump-audio", F(dump), .type = OS_OPT_STR, .help = "write the 16 kHz mono samples here"},
    {.name = "n_mels", F(n_mels), .type = OS_OPT_INT, .range = "[1,1024]", .help = "mel bands (default 80)"},
    {.name = "bench", F(bench), .type = OS_OPT_INT, .range = "[0,inf)", .help = "time N log-mel runs (default 0)"},
    {.name = "filters", F(filters), .type = OS_OPT_FLAG, .help = "write the mel filter bank instead"},
    {.name = "no-pad", F(no_pad), .type = OS_OPT_FLAG, .help = "the whole file instead of 30 s"},
};
#undef F

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

// x[rows, cols] (cols < 0: a vector [rows]) -> path: safetensors tensor `name`, or raw float32
static int write_f32(const char *path, const char *name, const float *x, int64_t rows, int64_t cols) {
    int64_t count = cols < 0 ? rows : rows * cols;
    if (ends_with(path, ".safetensors")) {
        int64_t shape[1][8] = {{rows, cols}};
        int ndim = cols < 0 ? 1 : 2;
        return os_st_write_f32(path, 1, &name, &ndim, (const int64_t(*)[8])shape, &x, NULL);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return os_errf("%s: cannot open for writing", path);
    size_t w = fwrite(x, sizeof(float), (size_t)count, f);
    if (fclose(f) != 0 || w != (size_t)count) return os_errf("%s: write failed (disk full?)", path);
    return 0;
}


int cmd_mel(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--encoder")) return cmd_mel_encoder(argc, argv);
    mel_args a = {.n_mels = 80};
    const os_opt_group g = {.title = "options", .opts = OPTS, .n = (int)(sizeof OPTS / sizeof OPTS[0]), .obj = &a};
    const os_opt_cmd c = {.command = "mel", .usage = USAGE, .groups = &g, .ngroups = 1};
    int parsed = os_opts_parse(&c, argc, argv);
    if (parsed == 1) return os_opts_usage(&c, stdout), 0;
    if (parsed < 0) return fprintf(stderr, "omnishard mel: %s\n", os_errmsg()), 2;
    const char *wav = a.wav, *out = a.out, *dump = a.dump;
    int n_mels = a.n_mels, filters = a.filters, no_pad = a.no_pad, bench = a.bench;
    if (filters) {
        if (!out) os_die("mel: --filters needs --out FILE");
        float *f = os_alloc((size_t)n_mels * OS_MEL_N_BINS * sizeof(float), "mel filters");
        os_mel_filters(f, n_mels);
        if (write_f32(out, "filters", f, n_mels, OS_MEL_N_BINS)) os_die_err();
        printf("%d %d\n", n_mels, OS_MEL_N_BINS);
        os_free(f);
        return 0;
    }
    if (!wav || (!out && !dump)) {
        fprintf(stderr, "omnishard mel: --wav and --out (or --dump-audio) are required\n");
        os_opts_usage(&c, stderr);
        return 2;
    }
    float *x = NULL;
    int64_t n = 0;
    if (os_audio_load_16k(wav, &x, &n)) os_die_err();
    if (dump) {
        if (write_f32(dump, "audio", x, n, -1)) os_die_err();
        if (!out) printf("%lld\n", (long long)n);
    }
    if (out) {
        float *w = x;
        if (!no_pad) {
            w = os_alloc(OS_AUDIO_N_SAMPLES * sizeof(float), "padded audio");
            os_audio_pad_or_trim(x, n, w);
            n = OS_AUDIO_N_SAMPLES;
        }
        int64_t T = n / OS_MEL_HOP;
        float *mel = os_alloc((size_t)(n_mels * T > 0 ? n_mels * T : 1) * sizeof(float), "log-mel");
        if (os_log_mel(w, n, n_mels, mel)) os_die("%s: %s", wav, os_errmsg());
        if (bench > 0) {
            double t0 = os_now();
            for (int r = 0; r < bench; r++) os_log_mel(w, n, n_mels, mel);
            double dt = (os_now() - t0) / bench;
            fprintf(stderr, "mel: %lld samples (%.1f s of audio) -> [%d, %lld] in %.2f ms per call (%.0fx real time)\n",
                    (long long)n, n / 16000.0, n_mels, (long long)T, dt * 1e3, n / 16000.0 / dt);
        }
        if (write_f32(out, "mel", mel, n_mels, T)) os_die_err();
        printf("%d %lld\n", n_mels, (long long)T);
        os_free(mel);
        if (w != x) os_free(w);
    }
    os_free(x);
    return 0;
}
