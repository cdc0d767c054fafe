// omnishard infer's options (the table of src/cli/cmd_infer.c) and how its ranks stop together.
#pragma once
#include <stdint.h>

// the options (cmd_infer.c's table); a penalty of 0, index or zero_stage of -1: not given
typedef struct {
    const char *model, *question, *wav, *dataset, *speech_encoder, *system, *task, *output_file, *device, *on_error;
    int64_t index, max_new_tokens, top_k, seed, batch, speech_batch_size;
    double temperature, top_p, penalty, text_penalty, audio_penalty;
    int do_sample, kv_cache, zero_stage, text_only, show_prompt, multi_round, resume, tf32;
} infer_args;

// every rank stops when any failed: 1 after printing the reason (the failing rank's message, else a note)
int os_infer_failed(int rc);
