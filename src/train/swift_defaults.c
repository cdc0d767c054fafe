// The sft defaults that differ from ms-swift's (train/swift_defaults.h).
#include "train/swift_defaults.h"

typedef struct {
    const char *option, *ours, *swift, *why;
} differ;

// ms-swift's values: its docs, "Command Line Parameters" (3.x); the SLAM-Omni recipe: docs/spec/slam-omni.md
static const differ DIFFER[] = {
    {"train_type", "full", "lora", "The SLAM-Omni recipe trains the whole LLM, the new audio rows of the embedding and head included"},
    {"learning_rate", "0.0001", "1e-5 in full training", "The SLAM-Omni recipe's AdamW learning rate"},
    {"weight_decay", "0", "0.1", "The SLAM-Omni recipe's AdamW has no decay (as transformers' default)"},
    {"adam_beta2", "0.999", "0.95", "PyTorch AdamW's default, which the SLAM-Omni recipe uses"},
    {"lr_scheduler_type", "linear", "cosine", "SLAM-LLM decays linearly to 0 (as transformers' default); cosine is one flag away"},
    {"num_train_epochs", "1", "3", "One pass over a speech corpus of 100k+ dialogues unless a count is given (the recipe sets its own)"},
    {"truncation_strategy", "right", "delete", "A long sample still trains on its first max_length tokens; delete drops it (counted in the log)"},
    {"logging_steps", "1", "5", "Every step's text and per-layer audio losses in logging.jsonl: a line costs nothing beside a CPU step"},
};

void os_sft_swift_defaults_usage(FILE *f) {
    fprintf(f, "\ndefaults that differ from ms-swift's (docs/training.md \"Defaults that differ from ms-swift\"):\n");
    for (size_t i = 0; i < sizeof DIFFER / sizeof *DIFFER; i++)
        fprintf(f, "  --%-28s %s; ms-swift: %s. %s\n", DIFFER[i].option, DIFFER[i].ours, DIFFER[i].swift, DIFFER[i].why);
}
