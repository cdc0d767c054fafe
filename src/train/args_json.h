// OUTPUT_DIR/args.json: the run's settings as resolved (docs/operations.md, "Output directories").
#pragma once
#include "train/sft_open.h"

// Rank 0, before the first step, into a's output_dir: every option of the table by name (numbers and booleans as
// JSON numbers and booleans, options not given as null), the ones the model decides replaced by its values
// (code_layer, num_latency_tokens, do_layershift, loss_weights), output_dir the run directory (a: the run's options,
// os_sft_run's), and "resolved" from the opened run r: world_size, global_batch_size, total_steps, warmup_steps,
// train_samples, eval_samples, resumed_from, resumed_at_step. Written atomically (a resumed run replaces it). 0, or
// -1 + message naming the file.
int os_args_json_write(const os_sft_args *a, const os_sft_state *r);
