// omnishard mel --encoder DIR: the frozen Whisper encoder's output for one input, for tests and benchmarks.
//   (--wav FILE: padded/trimmed to 2 * max_source_positions * 160 samples, then log-mel; or --mel-in FILE with a
//   tensor "mel" [n_mels, T_mel]) -> OUT.safetensors with "mel" [n_mels, T_mel] and "encoder_output" [T, d].
#include "cli/commands.h"
#include "cli/device.h"
#include "core/device.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/opts.h"
#include "core/timer.h"
#include "audio/audio.h"
#include "audio/logmel.h"
#include "kernels/ops.h"
#include "io/hfconfig.h"
#include "io/safetensors.h"
#include "model/whisper.h"
#include "session/model_runtime.h"
#include "zero/runtime.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char *USAGE =
    "usage: omnishard mel --encoder DIR (--wav FILE | --mel-in MEL.safetensors) --out OUT.safetensors [--bench N]\n"
    "DIR: a Hugging Face Whisper directory (WhisperModel, WhisperForConditionalGeneration or WhisperEncoder).\n"
    "--wav: padded or trimmed to 2 * max_source_positions * 160 samples (30 s for Whisper), then the log-mel.\n"
    "--mel-in: a tensor \"mel\" [n_mels, T_mel] used as is. OUT gets \"mel\" and \"encoder_output\" [T, d].\n"
    "--bench N: time N runs of log-mel + encoder and print the throughput in seconds of audio per second.\n"
    "--device: the backend the encoder runs on (cpu, the default; cuda; guard: the test backend).\n";

typedef struct {
    const char *dir, *wav, *mel_in, *out, *device;
    int bench;
} encoder_args;

#define F(n) .off = offsetof(encoder_args, n)
static const os_opt OPTS[] = {
    {.name = "encoder", F(dir), .type = OS_OPT_STR, .help = "the Hugging Face Whisper directory"},
    {.name = "wav", F(wav), .type = OS_OPT_STR, .help = "the audio file"},
    {.name = "mel-in", F(mel_in), .type = OS_OPT_STR, .help = "a safetensors file with \"mel\" [n_mels, T_mel]"},
    {.name = "out", F(out), .type = OS_OPT_STR, .help = "OUT.safetensors to write"},
    {.name = "device", F(device), .type = OS_OPT_STR, .metavar = OS_DEVICE_VALUES,
     .help = "the backend the encoder runs on (default cpu; guard: the test backend, docs/design.md)"},
    {.name = "bench", F(bench), .type = OS_OPT_INT, .range = "[0,inf)", .help = "time N runs (default 0)"},
};
#undef F

typedef struct {
    os_registry reg;
    os_whisper w;
    zr_runtime rt;
    os_st_dir *d;
} encoder;

static int encoder_open(encoder *e, const char *dir) {
    memset(e, 0, sizeof *e);
    char path[4200];
    os_whisper_config c;
    os_name_map map;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (os_whisper_config_load(path, &c) < 0 || os_whisper_declare(&e->w, &e->reg, &c) < 0) return -1;
    if (!(e->d = os_st_dir_open(dir)) || os_whisper_name_map(e->d, dir, &map) < 0 ||
        os_params_check_map(&e->reg, e->d, dir, 0, e->reg.nb, &map) < 0)
        return -1;
    os_runtime_init(&e->rt, &e->reg, 0, 0, 1);
    for (int b = 0; b < e->reg.nb; b++)
        if (os_runtime_fill(&e->rt, &e->reg, b, e->d, &map, 0) < 0) return os_err_ctx("%s", dir);
    return 0;
}

static void encoder_close(encoder *e) {
    zr_free(&e->rt);
    os_whisper_free(&e->w);
    os_reg_free(&e->reg);
    os_st_dir_close(e->d);
}

// WAV -> padded to n samples -> mel[n_mels, n / 160]
static int wav_mel(const char *wav, int64_t n, int n_mels, float *mel) {
    float *x = NULL, *pad = os_alloc(sizeof(float) * (size_t)n, "padded audio");
    int64_t m = 0;
    int rc = os_audio_load_16k(wav, &x, &m);
    if (rc == 0) {
        memcpy(pad, x, sizeof(float) * (size_t)(m < n ? m : n));
        rc = os_log_mel(pad, n, n_mels, mel);
    }
    os_free(x), os_free(pad);
    return rc;
}

static float *read_mel(const char *path, int64_t n_mels, int64_t *T_mel) {
    os_st_file *f = os_st_open(path);
    if (!f) return NULL;
    const os_st_tensor *t = os_st_find(f, "mel");
    float *mel = NULL;
    if (!t || t->ndim != 2 || t->shape[0] != n_mels)
        os_errf("%s: expected a tensor \"mel\" [%lld, T_mel]", path, (long long)n_mels);
    else {
        *T_mel = t->shape[1];
        mel = os_alloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1), "mel input");
        if (os_st_read_f32(t, 0, t->numel, mel) < 0) os_free(mel), mel = NULL;
    }
    os_st_close(f);
    return mel;
}

static int write_out(const char *path, const float *mel, int64_t n_mels, int64_t T_mel, const float *enc, int64_t T,
                     int64_t d) {
    const char *names[2] = {"mel", "encoder_output"};
    int nd[2] = {2, 2};
    int64_t shapes[2][8] = {{n_mels, T_mel}, {T, d}};
    const float *data[2] = {mel, enc};
    return os_st_write_f32(path, 2, names, nd, (const int64_t(*)[8])shapes, data, NULL);
}

int cmd_mel_encoder(int argc, char **argv) {
    encoder_args a = {.device = "cpu"};
    const os_opt_group g = {.title = "options", .opts = OPTS, .n = (int)(sizeof OPTS / sizeof OPTS[0]), .obj = &a};
    const os_opt_cmd c = {.command = "mel --encoder", .usage = USAGE, .groups = &g, .ngroups = 1};
    int parsed = os_opts_parse(&c, argc, argv);
    if (parsed == 1) return os_opts_usage(&c, stdout), 0;
    if (parsed == 0 && (!a.dir || !a.out || !a.wav == !a.mel_in))
        parsed = os_errf("needs DIR, --out and one of --wav / --mel-in");
    if (parsed == 0) parsed = os_cli_device_open(a.device, 0, 0);
    if (parsed < 0) return fprintf(stderr, "omnishard mel --encoder: %s\n", os_errmsg()), os_opts_usage(&c, stderr), 2;
    const char *dir = a.dir, *wav = a.wav, *mel_in = a.mel_in, *out = a.out;
    int bench = a.bench;
    encoder e;
    if (encoder_open(&e, dir) < 0) os_die_err();
    const os_whisper *w = &e.w;
    int64_t T_mel = os_whisper_mel_frames(w), n_wave = os_whisper_wave_samples(w);
    float *mel = NULL;
    if (mel_in) {
        if (!(mel = read_mel(mel_in, w->n_mels, &T_mel))) os_die_err();
    } else {
        mel = os_alloc(sizeof(float) * (size_t)(w->n_mels * T_mel), "log-mel");
        if (wav_mel(wav, n_wave, (int)w->n_mels, mel) < 0) os_die_err();
    }
    int64_t T = os_whisper_out_frames(T_mel);
    if (T < 1 || T > w->n_pos)
        os_die("%s: %lld mel frames give %lld encoder frames; the encoder takes 1..%lld (max_source_positions)", mel_in,
               (long long)T_mel, (long long)T, (long long)w->n_pos);
    float *enc = os_alloc(sizeof(float) * (size_t)(T * w->d), "encoder output");
    int64_t mel_bytes = (int64_t)sizeof(float) * w->n_mels * T_mel;   // the encoder's input and output on the backend
    float *mel_d = os_k->alloc(mel_bytes, "log-mel (backend)"), *enc_d = os_k->alloc((int64_t)sizeof(float) * T * w->d, "encoder output (backend)");
    const float *mels[1] = {mel_d};
    float *outs[1] = {enc_d};
    os_weights wt = os_runtime_weights(&e.rt);
    os_k->upload(mel_d, mel, mel_bytes);
    os_whisper_fwd(w, &wt, 1, mels, T_mel, outs);
    if (bench > 0) {
        double tm = 0.0, te = 0.0, ce = 0.0;
        for (int r = 0; r < bench; r++) {
            double t0 = os_now();
            if (wav && wav_mel(wav, n_wave, (int)w->n_mels, mel) < 0) os_die_err();
            os_k->upload(mel_d, mel, mel_bytes);
            double t1 = os_now(), c1 = os_cpu_now();
            os_whisper_fwd(w, &wt, 1, mels, T_mel, outs);
            os_k->download(enc, enc_d, (int64_t)sizeof(float) * T * w->d);
            tm += t1 - t0, te += os_now() - t1, ce += os_cpu_now() - c1;
        }
        double secs = (double)T_mel * OS_MEL_HOP / OS_AUDIO_RATE;
        printf("bench: %.1f s of audio per input: load+log-mel %.1f ms, encoder %.1f ms per input (CPU %.1f ms); %.2f s "
               "of audio per second\n", secs, 1e3 * tm / bench, 1e3 * te / bench, 1e3 * ce / bench, secs * bench / (tm + te));
    }
    os_k->download(enc, enc_d, (int64_t)sizeof(float) * T * w->d);
    os_k->free(mel_d), os_k->free(enc_d);
    if (write_out(out, mel, w->n_mels, T_mel, enc, T, w->d) < 0) os_die_err();
    printf("%lld %lld\n", (long long)T, (long long)w->d);
    os_free(mel), os_free(enc);
    encoder_close(&e);
    return 0;
}
