// omnishard infer's options (the table of src/cli/cmd_infer.c), settled into the generation and session settings,
// and how its ranks stop together.
#pragma once
#include "infer/infer.h"
#include "session/session.h"
#include <stdint.h>

// the options (cmd_infer.c's table); a penalty of 0, index or zero_stage of -1: not given
typedef struct {
    const char *model, *question, *wav, *dataset, *speech_encoder, *system, *task, *output_file, *device, *on_error;
    int64_t index, max_new_tokens, top_k, seed, batch, speech_batch_size;
    double temperature, top_p, penalty, text_penalty, audio_penalty;
    int do_sample, kv_cache, zero_stage, text_only, show_prompt, multi_round, resume, overwrite, tf32;
    double ddp_timeout;   // seconds a rank waits in one collective (--ddp_timeout)
} infer_args;

// every rank stops when any failed: 1 after printing the reason (the failing rank's message, else a note)
int os_infer_failed(int rc);
// the options into the generation settings g and the session's so, *index the record of --dataset; checks what they
// name (a run directory instead of a model, the speech encoder the model records). 0, or -1 + message
int os_infer_settle(const infer_args *a, os_gen_opts *g, os_session_opts *so, int64_t *index, int nranks);
