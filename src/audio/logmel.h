// Whisper's log-mel front end (openai-whisper audio.log_mel_spectrogram; formulas in
// docs/spec/whisper-frontend.md): 16 kHz wave -> [n_mels, n/160] with n_fft 400, hop 160.
#pragma once
#include <stdint.h>

#define OS_MEL_N_FFT 400
#define OS_MEL_HOP 160
#define OS_MEL_N_BINS 201   // one-sided STFT bins, n_fft / 2 + 1

// f[n_mels, 201]: librosa.filters.mel(sr=16000, n_fft=400, n_mels) with the Slaney scale and area norm,
// bit-identical to openai-whisper's mel_filters.npz for n_mels 80 and 128. Any n_mels >= 1 works.
void os_mel_filters(float *f, int n_mels);

// out[n_mels, n / 160] = Whisper log-mel of wave[n] (pass n = 480000 after os_audio_pad_or_trim for the
// encoder's [n_mels, 3000]): reflect-padded centred STFT with a periodic Hann window, |X|^2 without the last
// frame, mel filter bank, log10(max(., 1e-10)), clamp to (global max - 8), (x + 4) / 4.
// Returns -1 (os_errmsg) when n <= 200 (reflect padding needs more samples) or n_mels < 1.
int os_log_mel(const float *wave, int64_t n, int n_mels, float *out);
