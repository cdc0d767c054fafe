#include "model/freeze.h"
#include "core/err.h"
#include <string.h>

int64_t os_embed_first_row(const os_model *m, const char *rows) {
    if (!strcmp(rows, "all")) return 0;
    if (!strcmp(rows, "new") || !strcmp(rows, "audio")) {
        if (m->oc.G < 1)
            return os_errf("--trainable_embed_rows %s: a plain LLM (model_type qwen2) has no new rows; expected all or none", rows);
        return rows[0] == 'n' ? m->oc.text_vocab - 64 : m->oc.text_vocab;
    }
    return os_errf("--trainable_embed_rows: expected all, new, audio or none, got '%s'", rows);
}

const char *os_freeze_embed_rows(const os_freeze_opts *f, int lora, int G) {
    return f->embed_rows ? f->embed_rows : lora && G > 0 ? "new" : f->llm || lora ? "none" : "all";
}

int os_model_freeze(os_model *m, const os_freeze_opts *f) {
    os_registry *r = &m->reg;
    if (f->encoder_projector && m->b_proj < 0)
        return os_errf("--freeze_encoder_projector: the model has no encoder projector (no --speech_encoder and none in the checkpoint)");
    if (f->group_decode_adapter && m->b_adapter < 0)
        return os_errf("--freeze_group_decode_adapter: the model has no group-decode adapter (code_layer %d)", m->oc.G);
    // LoRA freezes the LLM's own weights; the new embedding rows train by default (with the adapter and projector:
    // PEFT's modules_to_save of this model)
    int lora = m->oc.lora.rank > 0, llm = f->llm || lora;
    if (llm) {
        for (int64_t l = 0; l < m->nlayers; l++) os_reg_freeze(r, m->b_layer[l]);
        os_reg_freeze(r, m->b_norm);
    }
    if (f->encoder_projector) os_reg_freeze(r, m->b_proj);
    if (f->group_decode_adapter) os_reg_freeze(r, m->b_adapter);
    const char *rows = os_freeze_embed_rows(f, lora, m->oc.G);
    int heads[2] = {m->b_embed, m->b_head};
    for (int k = 0; k < (m->b_head == m->b_embed ? 1 : 2); k++) {
        if (!strcmp(rows, "none")) {
            os_reg_freeze(r, heads[k]);
            continue;
        }
        int64_t first = os_embed_first_row(m, rows);
        if (first < 0) return -1;
        if (first >= m->V) return os_errf("--trainable_embed_rows %s: no such rows in a vocabulary of %lld", rows, (long long)m->V);
        os_reg_train_range(r, heads[k], first * m->C, m->V * m->C);   // the bucket holds only this [V, C] tensor
    }
    if (os_reg_numel(r, 1) == 0) return os_errf("every parameter is frozen: nothing to train (see the --freeze_* options)");
    return 0;
}
