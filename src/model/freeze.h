// Which parameters train (docs/training.md "Freezing"), with the reference's switches (SLAM-LLM examples/s2s
// s2s_config.py TrainConfig): freeze_llm (decoder layers, final norm, embed_tokens, lm_head),
// freeze_encoder_projector, freeze_group_decode_adapter; the Whisper encoder is always frozen. The embedding rows
// that train are chosen separately (trainable_embed_rows), so "only the new rows" composes with freeze_llm.
// Frozen buckets get no gradient buffer and no optimizer state in the sharding runtime (src/zero/runtime.h).
#pragma once
#include "model/omni.h"

typedef struct {
    int llm, encoder_projector, group_decode_adapter;   // freeze_* switches
    // rows of embed_tokens / lm_head that train: "all", "new" (the 64 special text ids and the audio ids: rows
    // [T-64, V)), "audio" (rows [T, V), the reference's train_audio_embed_only range) or "none";
    // NULL: "all", "none" under freeze_llm, "new" with LoRA (m->oc.lora.rank > 0, which also freezes the LLM's
    // own weights)
    const char *embed_rows;
} os_freeze_opts;

// Apply f to the model's registry (before the runtime is created). -1 + message when a switch names a module the
// model does not have, the row choice is unknown or leaves no row, or nothing at all would train.
int os_model_freeze(os_model *m, const os_freeze_opts *f);
// the embedding rows that train: f->embed_rows, or its default for the model (LoRA: rank > 0; G audio layers)
const char *os_freeze_embed_rows(const os_freeze_opts *f, int lora, int G);
// first trained row of the embedding for a row choice ("all" 0, "new" T-64, "audio" T); -1 + message when unknown
int64_t os_embed_first_row(const os_model *m, const char *rows);
