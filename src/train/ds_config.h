// --deepspeed FILE.json: a DeepSpeed config read as DeepSpeed and transformers' integration read it, for what
// omnishard implements (docs/training.md "DeepSpeed config files"): the ZeRO stage, batch sizes, accumulation,
// clipping, bf16, the AdamW and schedule blocks; each value "auto" (the flag's) or a number that sets the option
// when its flag is not on the command line and must equal it when it is. Keys with no effect here are accepted and
// listed; offload, fp16 and ZeRO++ quantization are errors with the reason; unknown keys a warning naming them.
#pragma once
#include "train/args.h"

// Read a->parallelism.deepspeed_file and apply it to a (argv: to tell which flags were given). 0, or -1 + message naming the
// file and the key. Sets a->parallelism.ds_hash (FNV-1a 64 of the file: the start-up agreement compares it),
// a->parallelism.ds_train_batch_size (0: auto) and a->parallelism.ds_notes (what was accepted without effect, and unknown keys).
int os_ds_config_apply(os_sft_args *a, int argc, char **argv);
// train_batch_size against the global batch (the world size is known only once MPI runs): 0, or -1 + message
int os_ds_config_check_batch(const os_sft_args *a, int world, int64_t global_batch);
