// omnishard infer after its options are settled (src/cli/cmd_infer.c): the session, one answer or the multi-round
// conversation, the output.
#pragma once
#include "infer/infer.h"
#include "session/session.h"

// the options (cmd_infer.c's table); a penalty of 0, index or zero_stage of -1: not given
typedef struct {
    const char *model, *question, *wav, *dataset, *speech_encoder, *system, *task;
    int64_t index, max_new_tokens, top_k, seed;
    double temperature, top_p, penalty, text_penalty, audio_penalty;
    int do_sample, kv_cache, zero_stage, text_only, show_prompt, multi_round;
} infer_args;

// every rank stops when any failed: 1 after printing the reason (the failing rank's message, else a note)
int os_infer_failed(int rc);
// collective; the exit status (0, or 1 after the message on stderr)
int os_infer_run(const infer_args *a, const os_gen_opts *g, const os_session_opts *so, int64_t index);
