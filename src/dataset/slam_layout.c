// The sample layout of slam_layout.h (pure: ids in, rows out).
#include "dataset/slam_layout.h"
#include <string.h>

// answer audio positions: latency + ceil((N + 1) / G) (tokens + eoa, filled to a multiple of G); 0 without
// target_token (codec_utils.py:26-49)
static int64_t audio_positions(const os_slam_config *c, const os_slam_parts *p) {
    if (!p->has_audio) return 0;
    return c->latency + (p->naudio + 1 + c->G - 1) / c->G;
}

int32_t os_slam_audio_id(const os_slam_config *c, int64_t g, int32_t raw) {
    return (int32_t)(c->T + (c->layershift ? g * c->A : 0) + raw);
}

void os_slam_lengths(const os_slam_config *c, const os_slam_parts *p, int64_t *P, int64_t *S, int64_t *La) {
    int64_t Q = p->speech ? c->speech_positions : p->nq, Ta = audio_positions(c, p);
    *P = 2 + p->np;
    *S = Q + 3;
    *La = p->na + 1 > Ta ? p->na + 1 : Ta;
}

void os_slam_build(const os_slam_config *c, const os_slam_parts *p, int64_t keep, os_sample *s) {
    const int64_t G = c->G, T = c->T, A = c->A, R = G + 1;
    int64_t P, S, La;
    os_slam_lengths(c, p, &P, &S, &La);
    if (keep > La) keep = La;
    const int64_t L = P + S + keep, Q = S - 3, Ta = audio_positions(c, p);
    int32_t *tx = s->ids + G * L, *tl = s->labels + G * L;   // the text row
    s->R = R, s->L = L, s->lead = P + S;
    for (int64_t i = 0; i < R * L; i++) s->labels[i] = -100;
    memset(s->speech, 0, (size_t)L);

    // prompt and input span: audio rows pad_a except the input span's markers
    for (int64_t g = 0; g < G; g++) {
        int32_t *a = s->ids + g * L;
        for (int64_t q = 0; q < P + S; q++) a[q] = os_slam_audio_id(c, g, os_pad_a(A));
        a[P] = os_slam_audio_id(c, g, os_input_a(A));
        a[P + S - 2] = os_slam_audio_id(c, g, os_eoa(A));
        a[P + S - 1] = os_slam_audio_id(c, g, os_answer_a(A));
    }
    tx[0] = os_input_t(T);
    if (p->np) memcpy(tx + 1, p->prompt, sizeof(int32_t) * (size_t)p->np);
    tx[P - 1] = os_eot(T);
    tx[P] = os_input_t(T);
    for (int64_t q = 0; q < Q; q++) tx[P + 1 + q] = p->speech ? os_pad_t(T) : p->question[q];
    if (p->speech) memset(s->speech + P + 1, 1, (size_t)Q);
    tx[P + S - 2] = os_eot(T);
    tx[P + S - 1] = os_answer_t(T);

    // answer: text ids, eot, pad_t; labels end with eot
    for (int64_t q = 0; q < keep; q++) {
        int32_t v = q < p->na ? p->answer[q] : q == p->na ? os_eot(T) : os_pad_t(T);
        tx[P + S + q] = v;
        tl[P + S + q] = q <= p->na ? v : -100;
    }
    // answer audio: seq = tokens + [eoa] + pad_a to a multiple of G; layer g holds `latency` pad_a, seq[g::G], then
    // pad_a. Audio labels: none for asr; none past Ta; none at all when text and audio have the same length and
    // mask_equal is set (the reference's labels[:G, -0:], speech_dataset_s2s.py:357-358)
    int audio_labels = p->task != OS_TASK_ASR && !(c->mask_equal && p->na + 1 == Ta);
    for (int64_t g = 0; g < G; g++) {
        int32_t *a = s->ids + g * L + P + S, *al = s->labels + g * L + P + S;
        for (int64_t q = 0; q < keep; q++) {
            int64_t k = (q - c->latency) * G + g;
            int32_t raw = q >= Ta || q < c->latency ? os_pad_a(A) : k < p->naudio ? p->audio[k] : k == p->naudio ? os_eoa(A) : os_pad_a(A);
            a[q] = os_slam_audio_id(c, g, raw);
            al[q] = q < Ta && audio_labels ? raw : -100;
        }
    }
}
