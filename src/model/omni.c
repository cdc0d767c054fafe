#include "model/omni.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/json_file.h"
#include "io/atomic.h"
#include "io/json_kind.h"
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const os_lora_module[OS_LORA_N] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

int os_lora_parse_targets(const char *s, unsigned *targets) {
    *targets = 0;
    if (!strcmp(s, "all-linear")) {
        *targets = (1u << OS_LORA_N) - 1;
        return 0;
    }
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, ",");
        int hit = -1;
        for (int t = 0; t < OS_LORA_N; t++)
            if (strlen(os_lora_module[t]) == n && !strncmp(p, os_lora_module[t], n)) hit = t;
        if (hit < 0)
            return os_errf("--target_modules: unknown module '%.*s' (expected all-linear or a comma-separated list of "
                           "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)", (int)n, p);
        *targets |= 1u << hit;
        p += n + (p[n] == ',');
    }
    return *targets ? 0 : os_errf("--target_modules: empty list");
}

void os_omni_config_default(os_omni_config *oc, int G) {
    memset(oc, 0, sizeof *oc);
    oc->G = G;
    oc->text_vocab = 152000;
    oc->audio_vocab = 4160;
    oc->adapter = G > 1;
    for (int i = 0; i <= G; i++) oc->loss_w[i] = 1.0f / (float)(G + 1);
    if (G == 0) oc->loss_w[0] = 1.0f;
    oc->proj_hidden = 2048;
    oc->proj_k = 5;
}

void os_omni_config_codes(os_omni_config *oc, int layershift, int latency) {
    oc->layershift = layershift;
    oc->latency = latency;
    oc->adapter = oc->G > 1 && !layershift;
}

static int json_int(const cJSON *o, const char *path, const char *key, int64_t lo, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return 0;
    if (!os_json_int(v, lo, INT64_MAX, out)) return os_errf("%s: field '%s': expected an integer >= %lld", path, key, (long long)lo);
    return 1;
}

int os_omni_config_load(const char *path, os_omni_config *oc) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    cJSON *o = os_json_config_read(path, OS_JSON_CONFIG_MAX, NULL);   // strictly: a key given twice is refused
    if (!o) return -1;
    int64_t G = oc->G, T = oc->text_vocab, A = oc->audio_vocab;
    int64_t sd = oc->speech_dim, ph = oc->proj_hidden, pk = oc->proj_k;
    int64_t lat = oc->latency;
    int rc = 0, kind = oc->proj_kind, shift = oc->layershift;
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(o, "do_layershift");
    if (ls && !cJSON_IsBool(ls)) rc = os_errf("%s: field 'do_layershift': expected true or false", path);
    else if (ls) shift = cJSON_IsTrue(ls);
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(o, "encoder_projector");
    if (rc == 0 && pj && (!cJSON_IsString(pj) || (kind = os_proj_kind_parse(pj->valuestring)) < 0))
        rc = os_errf("%s: field 'encoder_projector': expected \"linear\" or \"cov1d-linear\" (the reference's "
                     "\"q-former\" is not supported), got %s", path, cJSON_IsString(pj) ? pj->valuestring : "a non-string");
    if (rc == 0 && (json_int(o, path, "num_latency_tokens", 0, &lat) < 0 || json_int(o, path, "code_layer", 0, &G) < 0 ||
                    json_int(o, path, "padded_text_vocabsize", 1, &T) < 0 ||
                    json_int(o, path, "padded_audio_vocabsize", 0, &A) < 0 || json_int(o, path, "encoder_dim", 0, &sd) < 0 ||
                    json_int(o, path, "projector_hidden", 1, &ph) < 0 ||
                    json_int(o, path, "encoder_projector_ds_rate", 1, &pk) < 0))
        rc = -1;
    else if (rc == 0 && G > OS_MAX_G)
        rc = os_errf("%s: field 'code_layer': at most %d supported, got %lld", path, OS_MAX_G, (long long)G);
    int64_t lr = oc->lora.rank;
    if (rc == 0 && json_int(o, path, "lora_rank", 0, &lr) < 0) rc = -1;
    os_lora_config lora = oc->lora;
    lora.rank = (int)lr;
    const cJSON *la = cJSON_GetObjectItemCaseSensitive(o, "lora_alpha"), *ld = cJSON_GetObjectItemCaseSensitive(o, "lora_dropout"),
                *lt = cJSON_GetObjectItemCaseSensitive(o, "lora_target_modules");
    if (la) lora.alpha = cJSON_IsNumber(la) ? (float)la->valuedouble : (rc = os_errf("%s: field 'lora_alpha': expected a number", path), 0);
    if (ld) lora.dropout = cJSON_IsNumber(ld) ? (float)ld->valuedouble : (rc = os_errf("%s: field 'lora_dropout': expected a number", path), 0);
    if (rc == 0 && lt && (!cJSON_IsString(lt) || os_lora_parse_targets(lt->valuestring, &lora.targets) < 0))
        rc = os_err_ctx("%s: field 'lora_target_modules'", path);
    const cJSON *se = cJSON_GetObjectItemCaseSensitive(o, "speech_encoder");
    if (rc == 0 && se && (!cJSON_IsString(se) || !se->valuestring[0] || strlen(se->valuestring) >= sizeof oc->speech_encoder))
        rc = os_errf("%s: field 'speech_encoder': expected the encoder directory as a non-empty string of at most %d "
                     "bytes", path, (int)sizeof oc->speech_encoder - 1);
    if (rc == 0) {
        os_omni_config_default(oc, (int)G);
        oc->lora = lora;
        oc->text_vocab = T;
        oc->audio_vocab = A;
        oc->speech_dim = sd, oc->proj_hidden = ph, oc->proj_k = pk, oc->proj_kind = kind;
        os_omni_config_codes(oc, shift, (int)lat);
        char dir[4096];   // a relative path: from the directory of this file (omnishard itself writes absolute ones)
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        if (se && os_path_absolute(se->valuestring, slash ? dir : ".", oc->speech_encoder, sizeof oc->speech_encoder) < 0)
            rc = os_err_ctx("%s: field 'speech_encoder'", path);
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "loss_weights");
        if (w) {
            if (!cJSON_IsArray(w) || cJSON_GetArraySize(w) != (int)G + 1)
                rc = os_errf("%s: field 'loss_weights': expected an array of %d numbers", path, (int)G + 1);
            for (int i = 0; rc == 0 && i <= G; i++) {
                const cJSON *x = cJSON_GetArrayItem(w, i);
                if (!cJSON_IsNumber(x)) rc = os_errf("%s: field 'loss_weights[%d]': expected a number", path, i);
                else oc->loss_w[i] = (float)x->valuedouble;
            }
        }
    }
    cJSON_Delete(o);
    return rc < 0 ? -1 : 1;
}

int os_omni_config_write(const char *path, const os_omni_config *oc) {
    enum { CAP = 1024 + 6 * sizeof oc->speech_encoder };   // every byte of the path escaped as \uXXXX at worst
    char *buf = os_alloc(CAP, "slam_omni.json text");
    int n = snprintf(buf, CAP,
                     "{\n  \"model_type\": \"slam_omni\",\n  \"code_layer\": %d,\n  \"padded_text_vocabsize\": %lld,\n"
                     "  \"padded_audio_vocabsize\": %lld,\n  \"num_latency_tokens\": %d,\n  \"do_layershift\": %s,\n"
                     "  \"loss_weights\": [",
                     oc->G, (long long)oc->text_vocab, (long long)oc->audio_vocab, oc->latency, oc->layershift ? "true" : "false");
    for (int i = 0; i <= oc->G; i++) n += snprintf(buf + n, CAP - (size_t)n, i ? ", %.9g" : "%.9g", oc->loss_w[i]);
    n += snprintf(buf + n, CAP - (size_t)n, "]");
    if (oc->speech_dim > 0)
        n += snprintf(buf + n, CAP - (size_t)n,
                      ",\n  \"encoder_projector\": \"%s\",\n  \"encoder_dim\": %lld,\n  \"projector_hidden\": %lld,\n"
                      "  \"encoder_projector_ds_rate\": %lld",
                      os_proj_kind_name(oc->proj_kind), (long long)oc->speech_dim, (long long)oc->proj_hidden,
                      (long long)oc->proj_k);
    if (oc->lora.rank > 0) {
        char al[32], dr[32];
        n += snprintf(buf + n, CAP - (size_t)n, ",\n  \"lora_rank\": %d,\n  \"lora_alpha\": %s,\n  \"lora_dropout\": %s,\n"
                      "  \"lora_target_modules\": \"", oc->lora.rank, os_float_str(oc->lora.alpha, al, sizeof al),
                      os_float_str(oc->lora.dropout, dr, sizeof dr));
        for (int t = 0, k = 0; t < OS_LORA_N; t++)
            if (oc->lora.targets >> t & 1) n += snprintf(buf + n, CAP - (size_t)n, k++ ? ",%s" : "%s", os_lora_module[t]);
        n += snprintf(buf + n, CAP - (size_t)n, "\"");
    }
    char se[sizeof oc->speech_encoder];   // absolute: the file may be read from anywhere
    if (oc->speech_encoder[0] && os_path_absolute(oc->speech_encoder, NULL, se, sizeof se) < 0) return os_free(buf), -1;
    if (oc->speech_encoder[0]) {   // as a JSON string (quotes, backslashes and control bytes escaped)
        cJSON *s = cJSON_CreateString(se);
        char *text = s ? cJSON_PrintUnformatted(s) : NULL;
        if (!text) os_die("out of memory: slam_omni.json speech_encoder");
        n += snprintf(buf + n, CAP - (size_t)n, ",\n  \"speech_encoder\": %s", text);
        cJSON_free(text), cJSON_Delete(s);
    }
    n += snprintf(buf + n, CAP - (size_t)n, "\n}\n");
    int rc = os_write_file_atomic(path, buf, (size_t)n);
    os_free(buf);
    return rc;
}

static int param2(os_registry *r, const char *name, int64_t a, int64_t b, os_init_kind k, float arg) {
    int64_t s[2] = {a, b};
    return os_reg_param(r, name, 2, s, k, arg);
}
static int param1(os_registry *r, const char *name, int64_t a, os_init_kind k, float arg) {
    return os_reg_param(r, name, 1, &a, k, arg);
}

// The tensors of a decoder layer, in declaration order (their parameter ids follow it), written once: the field of
// os_layer_ids (OS_LAYER_TENSORS, model/omni.h) that gets its id, its name under model.layers.N., its shape in the
// model's sizes (cols NONE: a vector [rows]) and the LoRA target it is (-1: none; docs/training.md "LoRA").
typedef enum { NONE, HID, QDIM, KVDIM, MLP } layer_dim;   // 0, C, H*D, KH*D, F
typedef struct {
    size_t field;
    const char *suffix;
    layer_dim rows, cols;
    int lora;
} layer_tensor;
static const layer_tensor LAYER_TENSORS[] = {
    {offsetof(os_layer_ids, ln1), "input_layernorm.weight", HID, NONE, -1},
    {offsetof(os_layer_ids, q_w), "self_attn.q_proj.weight", QDIM, HID, OS_LORA_Q},
    {offsetof(os_layer_ids, q_b), "self_attn.q_proj.bias", QDIM, NONE, -1},
    {offsetof(os_layer_ids, k_w), "self_attn.k_proj.weight", KVDIM, HID, OS_LORA_K},
    {offsetof(os_layer_ids, k_b), "self_attn.k_proj.bias", KVDIM, NONE, -1},
    {offsetof(os_layer_ids, v_w), "self_attn.v_proj.weight", KVDIM, HID, OS_LORA_V},
    {offsetof(os_layer_ids, v_b), "self_attn.v_proj.bias", KVDIM, NONE, -1},
    {offsetof(os_layer_ids, o_w), "self_attn.o_proj.weight", HID, QDIM, OS_LORA_O},
    {offsetof(os_layer_ids, ln2), "post_attention_layernorm.weight", HID, NONE, -1},
    {offsetof(os_layer_ids, gate), "mlp.gate_proj.weight", MLP, HID, OS_LORA_GATE},
    {offsetof(os_layer_ids, up), "mlp.up_proj.weight", MLP, HID, OS_LORA_UP},
    {offsetof(os_layer_ids, down), "mlp.down_proj.weight", HID, MLP, OS_LORA_DOWN},
};
#define NLAYER_TENSORS (sizeof LAYER_TENSORS / sizeof LAYER_TENSORS[0])
#define COUNT_ONE(arg, field) +1
_Static_assert(NLAYER_TENSORS == 0 OS_LAYER_TENSORS(COUNT_ONE, _), "one LAYER_TENSORS row per OS_LAYER_TENSORS field");
#undef COUNT_ONE

static int64_t layer_size(const os_model *m, layer_dim d) {
    const int64_t size[] = {0, m->C, m->H * m->D, m->KH * m->D, m->F};
    return size[d];
}

static int64_t g_logits_rows;
void os_model_force_logits_rows(int64_t rows) { g_logits_rows = rows; }

int os_model_build(os_model *m, const os_qwen2_config *cfg, const os_omni_config *oc) {
    memset(m, 0, sizeof *m);
    m->logits_rows = g_logits_rows;
    m->cfg = *cfg;
    m->oc = *oc;
    m->C = cfg->hidden_size;
    m->H = cfg->num_attention_heads;
    m->KH = cfg->num_key_value_heads;
    m->D = cfg->head_dim;
    m->F = cfg->intermediate_size;
    m->nlayers = cfg->num_hidden_layers;
    if (oc->G == 0) {
        m->V = cfg->vocab_size;
        m->oc.text_vocab = m->V;
        m->oc.audio_vocab = 0;
    } else {
        m->V = oc->text_vocab + oc->audio_vocab * (oc->layershift ? oc->G : 1);
        if (oc->text_vocab < 64 || oc->audio_vocab < 64)
            return os_errf("SLAM-Omni vocabulary: text (%lld) and audio (%lld) sizes must each be >= 64 "
                           "(64 special ids are reserved at the end of each)",
                           (long long)oc->text_vocab, (long long)oc->audio_vocab);
    }
    if (m->D % 2) return os_errf("config.json: field 'head_dim': must be even for RoPE, got %lld", (long long)m->D);
    os_registry *r = &m->reg;
    char nm[112];
    m->b_embed = os_reg_bucket(r, "embed_tokens", 1);
    m->embed = param2(r, "model.embed_tokens.weight", m->V, m->C, OS_INIT_NORMAL, 0.02f);
    r->p[m->embed].resizable = 1;
    m->layer = os_alloc(sizeof *m->layer * (size_t)m->nlayers, "layer ids");
    m->b_layer = os_alloc(sizeof(int) * (size_t)m->nlayers, "layer buckets");
    for (int64_t l = 0; l < m->nlayers; l++) {
        os_layer_ids *L = &m->layer[l];
        snprintf(nm, sizeof nm, "layers.%lld", (long long)l);
        m->b_layer[l] = os_reg_bucket(r, nm, 1);
        for (size_t i = 0; i < NLAYER_TENSORS; i++) {
            const layer_tensor *t = &LAYER_TENSORS[i];
            int64_t rows = layer_size(m, t->rows), cols = layer_size(m, t->cols);
            snprintf(nm, sizeof nm, "model.layers.%lld.%s", (long long)l, t->suffix);
            int id = cols ? param2(r, nm, rows, cols, OS_INIT_REQUIRED, 0) : param1(r, nm, rows, OS_INIT_REQUIRED, 0);
            *(int *)((char *)L + t->field) = id;
            r->p[id].gemm = cols > 0;   // the matrices are product operands (os_param.gemm, below)
        }
    }
    m->b_norm = os_reg_bucket(r, "norm", 1);
    m->final_norm = param1(r, "model.norm.weight", m->C, OS_INIT_REQUIRED, 0);
    if (cfg->tie_word_embeddings) {
        m->b_head = m->b_embed;
        m->lm_head = m->embed;
    } else {
        m->b_head = os_reg_bucket(r, "lm_head", 1);
        m->lm_head = param2(r, "lm_head.weight", m->V, m->C, OS_INIT_NORMAL, 0.02f);
        r->p[m->lm_head].resizable = 1;
    }
    m->adapter_w = m->adapter_b = m->b_adapter = -1;
    if (m->oc.G > 0 && m->oc.adapter) {
        int64_t A = m->oc.audio_vocab;
        m->b_adapter = os_reg_bucket(r, "group_decode_adapter", 1);
        m->adapter_w = param2(r, "group_decode_adapter.linear.weight", m->oc.G * A, A, OS_INIT_LINEAR_W, 0);
        m->adapter_b = param1(r, "group_decode_adapter.linear.bias", m->oc.G * A, OS_INIT_LINEAR_B, 0);
        r->p[m->adapter_b].fan_in = A;
    }
    m->b_proj = m->proj_w1 = m->proj_b1 = m->proj_w2 = m->proj_b2 = m->proj_cw = m->proj_cb = -1;
    if (m->oc.speech_dim > 0) {   // speech projector (docs/speech.md)
        if (m->oc.G < 1)
            return os_errf("speech input (encoder_dim %lld) needs a SLAM-Omni model (code_layer >= 1)", (long long)m->oc.speech_dim);
        int64_t d = m->oc.speech_dim, I = m->oc.proj_k * d, Hd = m->oc.proj_hidden;
        m->b_proj = os_reg_bucket(r, "encoder_projector", 1);
        if (m->oc.proj_kind == OS_PROJ_COV1D) {   // Conv1d(d, d, k, stride k): PyTorch's init bound 1/sqrt(d*k)
            int64_t cs[3] = {d, d, m->oc.proj_k};
            m->proj_cw = os_reg_param(r, "encoder_projector.conv1d.weight", 3, cs, OS_INIT_LINEAR_W, 0);
            m->proj_cb = param1(r, "encoder_projector.conv1d.bias", d, OS_INIT_LINEAR_B, 0);
            r->p[m->proj_cw].fan_in = r->p[m->proj_cb].fan_in = I;
            I = d;
        }
        m->proj_w1 = param2(r, "encoder_projector.linear1.weight", Hd, I, OS_INIT_LINEAR_W, 0);
        m->proj_b1 = param1(r, "encoder_projector.linear1.bias", Hd, OS_INIT_LINEAR_B, 0);
        r->p[m->proj_b1].fan_in = I;
        m->proj_w2 = param2(r, "encoder_projector.linear2.weight", m->C, Hd, OS_INIT_LINEAR_W, 0);
        m->proj_b2 = param1(r, "encoder_projector.linear2.bias", m->C, OS_INIT_LINEAR_B, 0);
        r->p[m->proj_b2].fan_in = Hd;
    }
    for (int64_t l = 0; l < m->nlayers; l++)
        for (int t = 0; t < OS_LORA_N; t++) m->layer[l].lora_a[t] = m->layer[l].lora_b[t] = -1;
    const os_lora_config *lc = &m->oc.lora;
    if (lc->rank > 0) {   // PEFT's init: lora_A kaiming_uniform(a=sqrt 5) = uniform(+-1/sqrt(in)), lora_B zeros
        m->b_lora = os_alloc(sizeof(int) * (size_t)m->nlayers, "LoRA buckets");
        for (int64_t l = 0; l < m->nlayers; l++) {
            snprintf(nm, sizeof nm, "lora.layers.%lld", (long long)l);
            m->b_lora[l] = os_reg_bucket(r, nm, 1);
            for (int t = 0; t < OS_LORA_N; t++) {
                if (!(lc->targets >> t & 1)) continue;
                int64_t O, I;
                const char *base = r->p[os_lora_base(m, l, t, &O, &I)].name;
                size_t bl = strlen(base) - strlen(".weight");
                snprintf(nm, sizeof nm, "%.*s.lora_A.weight", (int)bl, base);
                m->layer[l].lora_a[t] = param2(r, nm, lc->rank, I, OS_INIT_LINEAR_W, 0);
                snprintf(nm, sizeof nm, "%.*s.lora_B.weight", (int)bl, base);
                m->layer[l].lora_b[t] = param2(r, nm, O, lc->rank, OS_INIT_ZEROS, 0);
            }
        }
    }
    // the matrix-product operands (os_param.gemm): under bf16 their owner may gather or keep them rounded. The head
    // is one; when tied it is the embedding table, whose rows the input side reads through os_weights.rows (from
    // the parameters themselves), never from a gathered bucket (model/forward.c embed_fwd)
    int gemm[] = {m->lm_head, m->adapter_w, m->proj_w1, m->proj_w2, m->proj_cw};
    for (size_t i = 0; i < sizeof gemm / sizeof gemm[0]; i++)
        if (gemm[i] >= 0) r->p[gemm[i]].gemm = 1;
    for (int64_t l = 0; l < m->nlayers; l++) {   // the layers' own matrices were marked when declared
        const os_layer_ids *L = &m->layer[l];
        for (int t = 0; t < OS_LORA_N; t++)
            if (L->lora_a[t] >= 0) r->p[L->lora_a[t]].gemm = r->p[L->lora_b[t]].gemm = 1;
    }
    return 0;
}

int os_lora_base(const os_model *m, int64_t l, int t, int64_t *O, int64_t *I) {
    for (size_t i = 0; i < NLAYER_TENSORS; i++) {
        const layer_tensor *e = &LAYER_TENSORS[i];
        if (e->lora != t) continue;
        *O = layer_size(m, e->rows), *I = layer_size(m, e->cols);
        return *(const int *)((const char *)&m->layer[l] + e->field);
    }
    OS_ASSERT(!"a LoRA target that no layer tensor has");
    return -1;
}

int os_model_own_buckets(const os_model *m) { return m->enc.nlayers > 0 ? m->enc.b_front : m->reg.nb; }

void os_model_free(os_model *m) {
    os_whisper_free(&m->enc);
    os_reg_free(&m->reg);
    os_free(m->layer);
    os_free(m->b_layer);
    os_free(m->b_lora);
    memset(m, 0, sizeof *m);
}
