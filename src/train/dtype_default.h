// --torch_dtype auto (the default): the training precision the model's own config.json asks for, as ms-swift's
// default torch_dtype (None: the model's), settled before the device opens; sft and plan settle it alike.
#pragma once
#include "train/args.h"
#include <stddef.h>

// model_dir/config.json's torch_dtype ("dtype" in transformers 5) into out; "" when it cannot be read (the model's
// load reports that)
void os_model_torch_dtype(const char *model_dir, char *out, size_t n);
// t->torch_dtype "auto" becomes "bfloat16" for a bfloat16 model, else "float32" (float32, no torch_dtype, float16:
// omnishard has no fp16 training; and any model under --tf32 true, TF32 being a format of fp32 products).
// line: the start-up line of `command` saying which precision and why, with the flag that overrides it (empty when
// --torch_dtype was given, or
// the model cannot be read). model_dtype: os_model_torch_dtype's; source: where it was read (for the line).
void os_sft_dtype_settle(os_sft_training_opts *t, int tf32, const char *model_dtype, const char *source,
                         const char *command, char *line, size_t n);
