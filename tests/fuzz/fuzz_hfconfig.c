// Fuzz target: a config.json read as a Qwen2 LLM config and as a Whisper encoder config (src/io/hfconfig.c), and
// as SLAM-Omni's slam_omni.json (src/model/omni.c).
#include "fuzz.h"
#include "io/hfconfig.h"
#include "model/omni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, "config.json");
    os_qwen2_config q;
    os_whisper_config w;
    os_omni_config o;
    (void)os_qwen2_config_load(path, &q);
    (void)os_whisper_config_load(path, &w);
    os_omni_config_default(&o, 3);
    (void)os_omni_config_load(path, &o);
    return 0;
}
