// Fuzz target: a training data file (src/dataset/): SLAM-Omni records or pretokenized samples, JSON Lines or a
// JSON array, opened as `sft --dataset` does for the model tests/fuzz/model (its tokenizer.json and
// slam_omni.json: G = 3, T = 512, A = 80), then the first 64 samples built and collated in pairs. The file sits
// beside a copy of tests/fuzz/model/q.wav (0.1 s, 16 kHz), which records may name as "q.wav".
#include "core/alloc.h"
#include "core/err.h"
#include "dataset/dataset.h"
#include "fuzz.h"
#include "io/atomic.h"
#include "model/omni.h"
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static os_data_sizes z;
    static char model[1024];
    if (!*model) {
        char path[1100];
        snprintf(model, sizeof model, "%s/model", fuzz_dir());
        snprintf(path, sizeof path, "%s/slam_omni.json", model);
        os_omni_config oc;
        os_omni_config_default(&oc, 3);
        if (os_omni_config_load(path, &oc) < 0) os_die_err();
        z = (os_data_sizes){oc.G, oc.text_vocab, oc.audio_vocab, 0, oc.latency, oc.layershift, 0, 0, NULL, 0, 0};
        snprintf(path, sizeof path, "%s/q.wav", model);
        size_t n;
        char *wav = os_read_file(path, &n);
        if (!wav) os_die_err();
        fuzz_file((const uint8_t *)wav, n, "q.wav");
        os_free(wav);
    }
    int trunc = size ? data[0] % 3 : 0;   // the truncation strategy and a short max_length from the first byte
    int64_t max_length = size && data[0] >= 128 ? 24 : 4096;
    os_dataset *d = os_dataset_open(fuzz_file(data, size, "data.jsonl"), &z, model, max_length,
                                    trunc == 0 ? "right" : trunc == 1 ? "left" : "delete");
    if (!d) return 0;
    os_sample s[2];
    for (int64_t i = 0; i < d->n && i < 64; i += 2) {
        int64_t m = d->n - i < 2 ? 1 : 2;   // samples stay valid for d->live >= 2 gets (0: all)
        if (d->get(d, i, &s[0]) < 0 || (m == 2 && d->get(d, i + 1, &s[1]) < 0)) break;
        os_batch b;
        os_collate(&b, s, m, 0);
        os_batch_free(&b);
    }
    d->free(d);
    return 0;
}
