// JSON configuration files read strictly (a --deepspeed file, config.json, slam_omni.json): a file larger than its
// bound (a mistaken path such as /dev/zero or a dataset) is refused without reading it all, and so are a NUL byte,
// content after the JSON value, and a key given twice in one object (JSON leaves duplicates undefined: DeepSpeed's
// Python reader keeps the last, cJSON the first, so the two programs would run different configurations).
#pragma once
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#define OS_JSON_CONFIG_MAX ((size_t)1 << 20)   // 1 MiB: a DeepSpeed config is a few hundred bytes

// the JSON object of path (cJSON_Delete it); *hash (may be NULL) = FNV-1a 64 of its bytes. NULL + message naming
// the file and what is wrong ("key \"stage\" is given twice in \"zero_optimization\": 3, then 0", ...)
cJSON *os_json_config_read(const char *path, size_t max_bytes, uint64_t *hash);
