// --deepspeed FILE.json: a DeepSpeed config read as DeepSpeed and transformers' integration read it, for what
// omnishard implements (docs/training.md "DeepSpeed config files"): the ZeRO stage, batch sizes, accumulation,
// clipping, bf16, the AdamW and schedule blocks; each value "auto" (the flag's) or a number that sets the option
// when its flag is not on the command line and must equal it when it is. Keys with no effect here are accepted and
// listed; offload, fp16 and ZeRO++ quantization are errors with the reason; unknown keys a warning naming them.
#pragma once
#include "train/args.h"

// Read p->deepspeed_file and apply it to the sections its keys set: the parallelism (stage), the training (batch,
// accumulation, clipping, precision, AdamW, schedule) and the checkpoint's (save_consolidated) (argv: to tell which
// flags were given). 0, or -1 + message naming the file and the key. Sets p->ds_hash (FNV-1a 64 of the file: the
// start-up agreement compares it), p->ds_train_batch_size (0: auto) and p->ds_notes (what was accepted without
// effect, and unknown keys).
int os_ds_config_apply(os_sft_parallelism_opts *p, os_sft_training_opts *t, os_sft_checkpoint_opts *ck, int argc,
                       char **argv);
// train_batch_size against the global batch, t's micro-batch x accumulation x world (the world size is known only
// once MPI runs): 0, or -1 + message
int os_ds_config_check_batch(const os_sft_parallelism_opts *p, const os_sft_training_opts *t, int world,
                             int64_t global_batch);
