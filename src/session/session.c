#include "session/session.h"
#include "core/err.h"
#include "model/load.h"
#include "model/load_audit.h"
#include "persist/checkpoint.h"
#include "kernels/ops.h"
#include "session/model_runtime.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int os_session_model_config(const os_session_opts *a, os_qwen2_config *cfg, os_omni_config *oc) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", a->model);
    if (os_qwen2_config_load(path, cfg) < 0) return -1;
    int slam = a->slam;
    os_omni_config_default(oc, slam ? 3 : 0);
    if (slam) {
        snprintf(path, sizeof path, "%s/slam_omni.json", a->model);
        if (os_omni_config_load(path, oc) < 0) return -1;
        int shift = a->do_layershift >= 0 ? a->do_layershift : oc->layershift;
        int latency = a->num_latency_tokens >= 0 ? a->num_latency_tokens : oc->latency;
        if (a->code_layer >= 0) {
            if (a->code_layer < 1 || a->code_layer > OS_MAX_G)
                return os_errf("--code_layer: expected 1-%d, got %d", OS_MAX_G, a->code_layer);
            os_omni_config tmp = *oc;
            os_omni_config_default(oc, a->code_layer);
            oc->text_vocab = tmp.text_vocab, oc->audio_vocab = tmp.audio_vocab;
            oc->speech_dim = tmp.speech_dim, oc->proj_hidden = tmp.proj_hidden, oc->proj_k = tmp.proj_k;
            oc->proj_kind = tmp.proj_kind;
        }
        os_omni_config_codes(oc, shift, latency);
    }
    if (!a->checkpoint) oc->lora = a->lora;   // LoRA comes from the flags only (docs/training.md "LoRA"), or from
                                              // the checkpoint's slam_omni.json, which records the run's
    if (a->speech_encoder || !a->checkpoint)   // the encoder in use; a checkpoint opened without one keeps its record
        snprintf(oc->speech_encoder, sizeof oc->speech_encoder, "%s", a->speech_encoder ? a->speech_encoder : "");
    if (a->n_loss_weights) {
        if (a->n_loss_weights != oc->G + 1)
            return os_errf("--loss_weights: expected %d values (text, then %d audio layers), got %d", oc->G + 1, oc->G, a->n_loss_weights);
        for (int i = 0; i <= oc->G; i++) oc->loss_w[i] = a->loss_weights[i];
    }
    return 0;
}

// Speech (docs/speech.md): the encoder's config from --speech_encoder DIR, and the projector's input size from it,
// or from a projector already in the checkpoint when no encoder is given (it is then carried along, frozen).
static int speech_config(os_session *s, const os_session_opts *a, os_omni_config *oc, os_whisper_config *wc) {
    const os_st_tensor *pw = os_st_dir_find(s->ckpt, "encoder_projector.linear1.weight");
    int cov1d = oc->proj_kind == OS_PROJ_COV1D;
    if (!cov1d && os_st_dir_find(s->ckpt, "encoder_projector.conv1d.weight"))
        return os_errf("%s: the checkpoint holds encoder_projector.conv1d.weight: set \"encoder_projector\": "
                       "\"cov1d-linear\" in slam_omni.json", a->model);
    if (pw && pw->ndim == 2 && oc->speech_dim == 0)
        oc->speech_dim = cov1d ? pw->shape[1] : pw->shape[1] / oc->proj_k, oc->proj_hidden = pw->shape[0];
    if (!a->speech_encoder) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", a->speech_encoder);
    if (os_whisper_config_load(path, wc) < 0) return -1;
    if (oc->G < 1) return os_errf("--speech_encoder: speech input needs --model_type slam_omni (code_layer >= 1)");
    if (oc->speech_dim && oc->speech_dim != wc->d_model)
        return os_errf("%s: field 'd_model': %d, but the model's projector takes encoder_dim %lld (from slam_omni.json "
                       "or encoder_projector.linear1.weight)", path, wc->d_model, (long long)oc->speech_dim);
    oc->speech_dim = wc->d_model;
    s->enc_ckpt = os_st_dir_open(a->speech_encoder);
    return s->enc_ckpt ? 0 : -1;
}

int os_session_declare(os_session *s, const os_session_opts *a) {
    memset(s, 0, sizeof *s);
    if (a->bf16 != os_k->bf16)   // the products' precision is the backend's, set when it opened (cli/device.c)
        return os_errf("the session asks for %s products but the %s backend was opened for %s ones", a->bf16 ? "bf16" :
                       "fp32", os_k->name, os_k->bf16 ? "bf16" : "fp32");
    s->model_dir = a->model;
    if (a->checkpoint && os_checkpoint_verify_files(a->model) < 0) return -1;   // before its config.json is believed
    os_qwen2_config cfg;
    os_omni_config oc;
    if (os_session_model_config(a, &cfg, &oc) < 0) return -1;
    char path[4200];
    for (int top = 0; top < 2 && !a->checkpoint; top++) {   // a base + PEFT adapter (export --merge_lora false, or
        // a checkpoint's model files without its manifest): not applied here, so refused (a checkpoint's LoRA is in
        // its rank files)
        snprintf(path, sizeof path, "%s%s/adapter_config.json", a->model, top ? "" : "/lora_adapter");
        if (access(path, F_OK) == 0)
            return os_errf("%s: this model directory carries a PEFT LoRA adapter (%s) that omnishard does not "
                           "apply; use a merged export (omnishard export --checkpoint DIR --merge_lora true) or remove "
                           "it", a->model, top ? "adapter_config.json" : "lora_adapter/");
    }
    int from_ckpt = a->checkpoint;   // the weights come from the checkpoint's rank files (below), not from tensors here
    snprintf(path, sizeof path, "%s/slam_omni.safetensors", a->model);
    os_audit_rules rules = {.first_slam = oc.G > 0 && access(path, F_OK) != 0, .first_speech = a->speech_encoder != NULL,
                            .tied = cfg.tie_word_embeddings};
    if (!from_ckpt && !(s->ckpt = os_st_dir_open(a->model))) return -1;
    if (!from_ckpt && oc.G > 0 && !rules.first_slam && os_st_dir_add_file(s->ckpt, path) < 0) return -1;
    if (oc.layershift && os_st_dir_find(s->ckpt, "group_decode_adapter.linear.weight"))
        return os_errf("%s: do_layershift gives every audio layer its own vocabulary rows and no group-decode adapter, "
                       "but the model has one (group_decode_adapter.linear.weight); use a model without it, or "
                       "do_layershift false", a->model);
    os_whisper_config wc;
    if (speech_config(s, a, &oc, &wc) < 0) return -1;
    os_model *m = &s->model;
    if (os_model_build(m, &cfg, &oc) < 0) return -1;
    if (a->speech_encoder && os_whisper_declare(&m->enc, &m->reg, &wc) < 0) return os_err_ctx("%s", a->speech_encoder);
    int nb_llm = m->enc.nlayers ? m->enc.b_front : m->reg.nb;   // the encoder's buckets come last
    os_name_map *map = &s->enc_map;
    *map = (os_name_map){"", ""};
    if (!from_ckpt && os_params_check_map(&m->reg, s->ckpt, a->model, 0, nb_llm, NULL) < 0) return -1;
    if (m->enc.nlayers && (os_whisper_name_map(s->enc_ckpt, a->speech_encoder, map) < 0 ||
                           os_params_check_map(&m->reg, s->enc_ckpt, a->speech_encoder, nb_llm, m->reg.nb, map) < 0))
        return -1;
    if (m->b_proj >= 0 && !m->enc.nlayers) os_reg_freeze(&m->reg, m->b_proj);   // no encoder: carried along unchanged
    if (a->frozen)   // inference: every bucket frozen, so the runtime allocates no gradient and no optimizer state
        for (int b = 0; b < m->reg.nb; b++) os_reg_freeze(&m->reg, b);
    else if (os_model_freeze(m, &a->freeze) < 0)
        return -1;
    if (!a->new_rows_init || !strcmp(a->new_rows_init, "mean_resizing"))   // rows a vocabulary resize adds (docs/training.md)
        for (int i = 0; i < m->reg.np; i++)
            if (m->reg.p[i].resizable) m->reg.p[i].init = OS_INIT_MEAN_ROWS;
    if (!from_ckpt && os_params_audit(&m->reg, s->ckpt, a->model, nb_llm, &rules) < 0) return -1;
    return 0;
}

int os_session_load(os_session *s, const os_session_opts *a, int rank, int nranks) {
    os_model *m = &s->model;
    int from_ckpt = a->checkpoint, nb_llm = m->enc.nlayers ? m->enc.b_front : m->reg.nb;
    os_runtime_init(&s->rt, &m->reg, a->zero_stage, rank, nranks);
    if (a->bf16) zr_set_bf16(&s->rt, 1);   // the matrices rounded once, gathered in bf16 (docs/zero.md "bf16")
    for (int b = from_ckpt ? nb_llm : 0; b < m->reg.nb; b++) {
        int enc = b >= nb_llm;
        if (os_runtime_fill(&s->rt, &m->reg, b, enc ? s->enc_ckpt : s->ckpt, enc ? &s->enc_map : NULL, (uint64_t)a->seed) < 0)
            return os_err_ctx("%s", enc ? a->speech_encoder : a->model);
    }
    if (from_ckpt && os_checkpoint_load(m, &s->rt, a->model, &s->ckpt_step) < 0) return -1;   // collective
    // the checkpoint pages just read would stay in this process's RSS for the whole run (4 bytes per F32
    // parameter of this rank's slices) although nothing reads them again during training
    os_st_dir_release_pages(s->ckpt);
    os_st_dir_release_pages(s->enc_ckpt);
    if (os_speech_init(&s->speech, m, a->speech_encoder, a->cache_speech_features) < 0) return -1;
    s->pad_id = 151643 < m->V ? 151643 : 0;
    os_acts_init(&s->acts, m);
    return 0;
}

int os_session_open(os_session *s, const os_session_opts *a, int rank, int nranks) {
    return os_session_declare(s, a) < 0 ? -1 : os_session_load(s, a, rank, nranks);
}

void os_session_close(os_session *s) {
    if (s->acts.m) os_acts_free(&s->acts);
    zr_free(&s->rt);
    os_speech_free(&s->speech);
    os_model_free(&s->model);
    os_st_dir_close(s->ckpt);
    os_st_dir_close(s->enc_ckpt);
    memset(s, 0, sizeof *s);
}
