// Prints the training samples omnishard builds from a dataset file (pretokenized or SLAM-Omni records), for
// tests/test_slam_dataset.py to compare with the Python port of the reference rules (tests/oracle/).
//   test_samples_tool DATASET MODEL_DIR MAX_LENGTH TRUNCATION [--collate B] [--pad ID] [--speech_positions Q]
//                     [--mask_equal_length_audio 0|1]
// One JSON object per sample: {"i", "L", "lead", "ids": [[..] x G+1], "labels", "speech" (or null), "wav"}, or with
// --collate, one per batch of B consecutive samples: {"ids": [B][G+1][L], "labels", "keymask", "speech"}; then
// {"n": N, "skipped": S}. Sizes (G, T, A, num_latency_tokens, do_layershift) come from MODEL_DIR/slam_omni.json. Errors: message on stderr, exit 1.
#include "core/err.h"
#include "dataset/dataset.h"
#include "model/omni.h"
#include "zero/comm.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void rows_i32(const int32_t *a, int64_t R, int64_t L) {
    putchar('[');
    for (int64_t r = 0; r < R; r++) {
        printf("%s[", r ? "," : "");
        for (int64_t p = 0; p < L; p++) printf("%s%d", p ? "," : "", a[r * L + p]);
        putchar(']');
    }
    putchar(']');
}

static void row_u8(const uint8_t *a, int64_t L) {
    putchar('[');
    for (int64_t p = 0; p < L; p++) printf("%s%d", p ? "," : "", a[p]);
    putchar(']');
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: test_samples_tool DATASET MODEL_DIR MAX_LENGTH TRUNCATION [--collate B] [--pad ID] [--speech_positions Q]\n");
        return argc == 1 ? 0 : 2;
    }
    int64_t B = 0, pad = 0, Q = 0, mask_equal = 0;
    for (int i = 5; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mask_equal_length_audio")) mask_equal = atoll(argv[i + 1]);
        if (!strcmp(argv[i], "--collate")) B = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--pad")) pad = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--speech_positions")) Q = atoll(argv[i + 1]);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/slam_omni.json", argv[2]);
    os_omni_config oc;
    os_omni_config_default(&oc, 3);
    if (os_omni_config_load(path, &oc) < 0) os_die_err();
    os_data_sizes z = {oc.G, oc.text_vocab, oc.audio_vocab, Q, oc.latency, oc.layershift, (int)mask_equal, 0, NULL, 0, 0};
    os_dataset *d = os_dataset_open(argv[1], &z, argv[2], atoll(argv[3]), argv[4]);
    if (!d) os_die_err();
    os_sample s[64];
    for (int64_t i = 0; i < d->n; i += B ? B : 1) {
        int64_t m = B ? (d->n - i < B ? d->n - i : B) : 1;
        for (int64_t k = 0; k < m; k++)
            if (d->get(d, i + k, &s[k]) < 0) os_die_err();
        if (!B) {
            printf("{\"i\": %lld, \"L\": %lld, \"lead\": %lld, \"ids\": ", (long long)i, (long long)s[0].L, (long long)s[0].lead);
            rows_i32(s[0].ids, s[0].R, s[0].L);
            printf(", \"labels\": ");
            rows_i32(s[0].labels, s[0].R, s[0].L);
            printf(", \"speech\": ");
            if (s[0].speech) row_u8(s[0].speech, s[0].L);
            else printf("null");
            const char *w = s[0].wav_index >= 0 && d->wav_path ? d->wav_path(d, s[0].wav_index) : NULL;
            printf(", \"wav\": ");
            if (w) printf("\"%s\"", w);
            else printf("null");
            printf("}\n");
            continue;
        }
        os_batch b;
        os_collate(&b, s, m, (int32_t)pad);
        printf("{\"ids\": [");
        for (int64_t k = 0; k < m; k++) printf("%s", k ? "," : ""), rows_i32(b.ids + k * b.R * b.L, b.R, b.L);
        printf("], \"labels\": [");
        for (int64_t k = 0; k < m; k++) printf("%s", k ? "," : ""), rows_i32(b.labels + k * b.R * b.L, b.R, b.L);
        printf("], \"keymask\": [");
        for (int64_t k = 0; k < m; k++) printf("%s", k ? "," : ""), row_u8(b.keymask + k * b.L, b.L);
        printf("], \"speech\": [");
        for (int64_t k = 0; k < m; k++) printf("%s", k ? "," : ""), row_u8(b.speech + k * b.L, b.L);
        printf("]}\n");
        os_batch_free(&b);
    }
    printf("{\"n\": %lld, \"skipped\": %lld}\n", (long long)d->n, (long long)os_dataset_skipped_total(d, comm_allreduce_max_i64));
    d->free(d);
    return 0;
}
