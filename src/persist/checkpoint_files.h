// The files of a checkpoint besides the rank files (config.json, slam_omni.json, tokenizer files): recorded in the
// manifest ("model_files": name, bytes, fnv1a64 of each) when the checkpoint is written, verified when it is read
// (resume, export), so an edited or damaged config.json is refused, not exported.
#pragma once
#include <cjson/cJSON.h>
#include <stdint.h>
#include "io/atomic.h"   // os_file_checksum

// adds "model_files" to the manifest object: every regular file of dir except manifest.json and rank-NNNNN.safetensors,
// and those of its directories one level down (lora_adapter/), named DIR/FILE
int os_ckpt_files_record(cJSON *manifest, const char *dir);
// every "model_files" entry of the manifest of dir matches its file (none recorded: an older checkpoint, nothing to
// check); 0 or -1 + message naming the file and both sizes/checksums
int os_ckpt_files_verify(const cJSON *manifest, const char *dir);
