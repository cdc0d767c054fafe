// ms-swift's sft options that omnishard does not have (docs/training.md "ms-swift's sft options", its "rejected" and
// "no effect" rows; tests/test_swift_flags.py keeps the two equal): the option parser refuses the first with the
// reason in the error line, and accepts the second (with any value) for a one-line note at start.
#include "train/swift_options.h"

#define FREEZE "freezing is by part (`--freeze_llm`, `--freeze_encoder_projector`, `--freeze_group_decode_adapter`, " \
               "`--trainable_embed_rows`)"
#define LOADER "samples are loaded in the training process (no worker processes)"
#define UPLOAD "nothing is uploaded: upload OUTPUT_DIR/final_model yourself (`huggingface-cli upload`)"
#define SELF_COGNITION "self-cognition data is not generated: leave it out"
#define QUANT "no quantized training (QLoRA): `--train_type lora` trains adapters on the unquantized model"
#define LORA_VARIANT "not implemented: plain LoRA (`--lora_rank`, `--lora_alpha`)"
static const os_opt_known KNOWN[] = {
    {"per_device_eval_batch_size", "evaluation uses `--per_device_train_batch_size`: leave it out", 0},
    {"model_revision", "nothing is downloaded: `--model` is a local directory (download that revision first: "
                       "`huggingface-cli download ID --revision REV --local-dir DIR`)", 0},
    {"hub_token", "nothing is downloaded or uploaded: leave it out", 0},
    {"push_to_hub", UPLOAD, 0},
    {"hub_model_id", UPLOAD, 0},
    {"template", "the sample layout is SLAM-Omni's (docs/dataset.md), not a chat template: leave it out", 0},
    {"padding_side", "collation pads as docs/dataset.md says (the prompt part on the left, the answer on the right, so "
                     "the answers line up): leave it out", 0},
    {"padding_free", "not implemented: `--packing true` removes most padding", 0},
    {"loss_scale", "the loss terms are weighted with `--loss_weights` (text and each audio layer)", 0},
    {"sequence_parallel_size", "no sequence parallelism (ZeRO data parallelism only): shard with `--deepspeed zero3`, "
                               "or shorten `--max_length`", 0},
    {"streaming", "datasets are local files, indexed at start, not streamed: leave it out", 0},
    {"columns", "the record fields are fixed (docs/dataset.md); `omnishard convert` maps the Parquet columns", 0},
    {"model_name", SELF_COGNITION, 0},
    {"model_author", SELF_COGNITION, 0},
    {"quant_method", QUANT, 0},
    {"quant_bits", QUANT, 0},
    {"max_pixels", "no vision inputs: leave it out", 0},
    {"freeze_parameters", FREEZE, 0},
    {"freeze_parameters_regex", FREEZE, 0},
    {"trainable_parameters", FREEZE, 0},
    {"modules_to_save", "with LoRA, what else trains is chosen by part (docs/training.md \"LoRA\")", 0},
    {"target_regex", "`--target_modules` lists the layers", 0},
    {"lora_bias", "LoRA adapters have no bias: leave it out", 0},
    {"lora_dtype", "adapters train in the run's precision (`--torch_dtype`)", 0},
    {"use_rslora", LORA_VARIANT, 0},
    {"use_dora", LORA_VARIANT, 0},
    {"lorap_lr_ratio", "not implemented: one learning rate (`--learning_rate`)", 0},
    {"init_weights", "LoRA's initialisation is PEFT's default (docs/training.md \"LoRA\"): leave it out", 0},
    {"optim", "the optimizer is AdamW (`--adam_beta1`, `--adam_beta2`, `--adam_epsilon`, `--weight_decay`)", 0},
    {"lr_scheduler_kwargs", "the schedules take no arguments (`--lr_scheduler_type`, `--warmup_ratio`, `--warmup_steps`)", 0},
    {"gradient_checkpointing_kwargs", "recomputation is per decoder layer, no options (`--gradient_checkpointing`)", 0},
    {"use_liger_kernel", "Liger's kernels are Triton kernels for PyTorch; omnishard has its own: leave it out", 0},
    {"neftune_noise_alpha", "not implemented (no embedding noise): leave it out", 0},
    {"group_by_length", "the sample order is the seeded shuffle (docs/training.md \"Sample order and batches\")", 0},
    {"logging_first_step", "not implemented (`--logging_steps 1`, the default, logs every step)", 0},
    {"eval_on_start", "not implemented (the first evaluation is at `--eval_steps`)", 0},
    {"predict_with_generate", "evaluation computes losses; generation is `omnishard infer`", 0},
    {"metric_for_best_model", "the best checkpoint is by `eval_loss`: leave it out", 0},
    {"greater_is_better", "the best checkpoint is the lowest `eval_loss`: leave it out", 0},
    {"acc_strategy", "accuracies are per token, per loss term: leave it out", 0},
    {"max_new_tokens", "generation options are `omnishard infer`'s", 0},
    {"temperature", "generation options are `omnishard infer`'s", 0},
    {"fp16", "no fp16: `--torch_dtype` says the precision (`float32` or `bfloat16`)", 0},
    {"bf16", "the precision is `--torch_dtype`: give `--torch_dtype bfloat16`", 0},
    {"full_determinism", "not implemented (a switch for PyTorch's nondeterministic CUDA kernels; omnishard has none): "
                         "leave it out", 0},
    {"save_safetensors", "checkpoints and final_model are always safetensors: leave it out", 0},
    {"create_checkpoint_symlink", "not implemented (`--resume_from_checkpoint true` finds the latest checkpoint)", 0},
    {"average_tokens_across_devices", "the loss is the mean over the step's non-empty micro-batches (docs/training.md "
                                      "\"The loop\")", 0},
    // accepted, no effect here
    {"dataloader_num_workers", LOADER, 1},
    {"dataloader_persistent_workers", LOADER, 1},
    {"dataloader_prefetch_factor", LOADER, 1},
    {"dataloader_pin_memory", "samples are loaded in the training process; the backend makes its own copies", 1},
    {"dataset_num_proc", "records are read and tokenized in the training process (no preprocessing workers)", 1},
    {"load_from_cache_file", "no dataset cache: samples are built from the records in the training process (speech "
                             "features: `--cache_speech_features`)", 1},
    {"use_hf", "nothing is downloaded: `--model` and `--dataset` are local paths", 1},
    {"ddp_find_unused_parameters", "no DDP: ZeRO's collectives cover every trained parameter", 1},
    {"remove_unused_columns", "records are read by their field names (docs/dataset.md); other fields are ignored", 1},
};
#undef FREEZE
#undef UPLOAD
#undef SELF_COGNITION
#undef QUANT
#undef LORA_VARIANT
#undef LOADER

const os_opt_known *os_sft_swift_known(int *n) {
    *n = (int)(sizeof KNOWN / sizeof KNOWN[0]);
    return KNOWN;
}

void os_sft_swift_notes(const unsigned char *given, const char *command) {
    os_opts_known_notes(KNOWN, (int)(sizeof KNOWN / sizeof KNOWN[0]), given, command);
}
