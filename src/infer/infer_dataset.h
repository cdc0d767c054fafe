// omnishard infer --dataset FILE --output_file OUT: a whole test set (docs/inference.md "A whole test set").
#pragma once
#include "infer/infer_args.h"
#include "infer/infer.h"
#include "infer/infer_output.h"
#include "session/session.h"
#include "tokenizer/tokenizer.h"

// --dataset with --output_file: every record, one JSON line each (infer_dataset.c) into out (opened and checked by
// os_infer_output_open on rank 0); tok NULL on ranks > 0 and when there is no text decoding. Collective; 0, or 1
// after the message.
int os_infer_dataset(os_session *s, const os_tokenizer *tok, const infer_args *a, const os_gen_opts *g,
                     os_infer_out *out);
