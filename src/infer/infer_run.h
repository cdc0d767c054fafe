// omnishard infer after its options are settled (src/cli/cmd_infer.c): the session, one answer or the multi-round
// conversation, or a whole test set (infer_dataset.h); the output.
#pragma once
#include "infer/infer_args.h"
#include "infer/infer.h"
#include "session/session.h"

// collective; the exit status (0, or 1 after the message on stderr)
int os_infer_run(const infer_args *a, const os_gen_opts *g, const os_session_opts *so, int64_t index);
