// Hugging Face config.json: Qwen2 (read, write, rewrite keeping extra fields) and Whisper (read).
// Defaults follow transformers' Qwen2Config / WhisperConfig; see docs/model-directory.md.
#include "io/hfconfig.h"
#include "io/atomic.h"
#include "core/alloc.h"
#include "core/err.h"
#include "io/json_file.h"
#include "io/json_kind.h"
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

// config.json: strictly (io/json_file.h; a key given twice is refused), at most 16 MiB
static cJSON *load_json(const char *path) { return os_json_config_read(path, (size_t)16 << 20, NULL); }

static const char *shown(const cJSON *v, char *buf, size_t n) {
    char *s = cJSON_PrintUnformatted(v);
    snprintf(buf, n, "%s", s ? s : "?");
    if (s) cJSON_free(s);
    return buf;
}

// present and not null
static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

// positive integer field; def <= 0 means required
static int get_pos_int(const char *path, const cJSON *o, const char *name, int def, int *out) {
    const cJSON *v = field(o, name);
    if (!v) {
        if (def <= 0) return os_errf("%s: field '%s': missing", path, name);
        *out = def;
        return 0;
    }
    int64_t x;
    if (!os_json_int(v, 1, INT32_MAX, &x)) {
        char got[64];
        return os_errf("%s: field '%s': expected a positive integer, got %s", path, name, shown(v, got, sizeof got));
    }
    *out = (int)x;
    return 0;
}

static int get_pos_double(const char *path, const cJSON *o, const char *name, double def, double *out) {
    const cJSON *v = field(o, name);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble)) {
        char got[64];
        return os_errf("%s: field '%s': expected a positive number, got %s", path, name, shown(v, got, sizeof got));
    }
    *out = v->valuedouble;
    return 0;
}

// string field that must equal one of the accepted values (def when absent)
static int get_string(const char *path, const cJSON *o, const char *name, const char *def, char *out, size_t cap) {
    const cJSON *v = field(o, name);
    char got[64];
    if (!v) {
        if (!def) return os_errf("%s: field '%s': missing", path, name);
        snprintf(out, cap, "%s", def);
        return 0;
    }
    if (!cJSON_IsString(v)) return os_errf("%s: field '%s': expected a string, got %s", path, name, shown(v, got, sizeof got));
    if (strlen(v->valuestring) >= cap)
        return os_errf("%s: field '%s': \"%.40s\" is too long (at most %zu characters)", path, name, v->valuestring, cap - 1);
    strcpy(out, v->valuestring);
    return 0;
}

static int require_value(const char *path, const char *name, const char *got, const char *want) {
    if (strcmp(got, want))
        return os_errf("%s: field '%s': \"%s\" is not supported (expected \"%s\")", path, name, got, want);
    return 0;
}

// token id: integer, null/absent (-1) or a list (its first integer)
static int token_id(const cJSON *o, const char *name) {
    const cJSON *v = field(o, name);
    if (cJSON_IsArray(v)) v = v->child;
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 2147483647.0 ? (int)v->valuedouble : -1;
}

// rope_scaling (transformers 4) / rope_parameters (transformers 5): only the plain "default" rope is implemented;
// a rope_theta inside overrides the top-level one.
static int check_rope(const char *path, const cJSON *o, const char *name, double *theta) {
    const cJSON *v = field(o, name);
    char got[96];
    if (!v) return 0;
    if (!cJSON_IsObject(v)) return os_errf("%s: field '%s': expected an object or null, got %s", path, name, shown(v, got, sizeof got));
    const cJSON *type = field(v, "rope_type");
    if (!type) type = field(v, "type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "default"))
        return os_errf("%s: field '%s': %s is not supported (only the default rope without scaling)", path, name,
                       shown(v, got, sizeof got));
    const cJSON *prf = field(v, "partial_rotary_factor");
    if (prf && !(cJSON_IsNumber(prf) && prf->valuedouble == 1.0))
        return os_errf("%s: field '%s': partial_rotary_factor %s is not supported (expected 1)", path, name,
                       shown(prf, got, sizeof got));
    return get_pos_double(path, v, "rope_theta", *theta, theta);
}

static int qwen2_from_json(const char *path, const cJSON *o, os_qwen2_config *c) {
    memset(c, 0, sizeof *c);
    char act[32];
    if (get_string(path, o, "model_type", "qwen2", c->model_type, sizeof c->model_type) ||
        require_value(path, "model_type", c->model_type, "qwen2") ||
        get_pos_int(path, o, "vocab_size", 0, &c->vocab_size) ||
        get_pos_int(path, o, "hidden_size", 0, &c->hidden_size) ||
        get_pos_int(path, o, "intermediate_size", 0, &c->intermediate_size) ||
        get_pos_int(path, o, "num_hidden_layers", 0, &c->num_hidden_layers) ||
        get_pos_int(path, o, "num_attention_heads", 0, &c->num_attention_heads) ||
        get_pos_int(path, o, "num_key_value_heads", c->num_attention_heads, &c->num_key_value_heads) ||
        get_pos_int(path, o, "max_position_embeddings", 32768, &c->max_position_embeddings) ||
        get_pos_double(path, o, "rms_norm_eps", 1e-6, &c->rms_norm_eps) ||
        get_pos_double(path, o, "rope_theta", 10000.0, &c->rope_theta) ||
        check_rope(path, o, "rope_scaling", &c->rope_theta) || check_rope(path, o, "rope_parameters", &c->rope_theta) ||
        get_string(path, o, "hidden_act", "silu", act, sizeof act) || require_value(path, "hidden_act", act, "silu"))
        return -1;
    const cJSON *hd = field(o, "head_dim");
    if (hd) {
        if (get_pos_int(path, o, "head_dim", 0, &c->head_dim)) return -1;
    } else {
        if (c->hidden_size % c->num_attention_heads)
            return os_errf("%s: field 'hidden_size': %d is not a multiple of num_attention_heads %d (and head_dim is "
                           "not given)", path, c->hidden_size, c->num_attention_heads);
        c->head_dim = c->hidden_size / c->num_attention_heads;
    }
    if (c->num_attention_heads % c->num_key_value_heads)
        return os_errf("%s: field 'num_key_value_heads': %d does not divide num_attention_heads %d", path,
                       c->num_key_value_heads, c->num_attention_heads);
    const cJSON *tie = field(o, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie)) {
        char got[64];
        return os_errf("%s: field 'tie_word_embeddings': expected true or false, got %s", path, shown(tie, got, sizeof got));
    }
    c->tie_word_embeddings = cJSON_IsTrue(tie);
    const cJSON *sw = field(o, "use_sliding_window");
    if (sw && !cJSON_IsFalse(sw))
        return os_errf("%s: field 'use_sliding_window': sliding-window attention is not supported (expected false)", path);
    const cJSON *lt = field(o, "layer_types");
    if (cJSON_IsArray(lt))
        for (const cJSON *e = lt->child; e; e = e->next)
            if (!cJSON_IsString(e) || strcmp(e->valuestring, "full_attention"))
                return os_errf("%s: field 'layer_types': only \"full_attention\" layers are supported", path);
    const cJSON *drop = field(o, "attention_dropout");
    if (drop && !(cJSON_IsNumber(drop) && drop->valuedouble == 0))
        return os_errf("%s: field 'attention_dropout': a non-zero attention dropout is not supported", path);
    // transformers 5 writes "dtype", earlier versions "torch_dtype"
    const char *dt_name = field(o, "torch_dtype") ? "torch_dtype" : "dtype";
    if (get_string(path, o, dt_name, "float32", c->torch_dtype, sizeof c->torch_dtype)) return -1;
    c->bos_token_id = token_id(o, "bos_token_id");
    c->eos_token_id = token_id(o, "eos_token_id");
    return 0;
}

int os_qwen2_config_load(const char *path, os_qwen2_config *c) {
    cJSON *o = load_json(path);
    if (!o) return -1;
    int rc = qwen2_from_json(path, o, c);
    cJSON_Delete(o);
    return rc;
}

// set (replace or add) a field of o
static void set_item(cJSON *o, const char *name, cJSON *v) {
    if (cJSON_GetObjectItemCaseSensitive(o, name)) cJSON_ReplaceItemInObjectCaseSensitive(o, name, v);
    else cJSON_AddItemToObject(o, name, v);
}

static int write_json(const char *path, const cJSON *o) {
    char *s = cJSON_Print(o);
    if (!s) return os_errf("%s: cannot format JSON (out of memory)", path);
    size_t n = strlen(s);
    int rc = os_write_file_atomic(path, s, n);
    cJSON_free(s);
    return rc;
}

// the fields we own, set on o (fresh or copied from the source config)
static void set_qwen2_fields(cJSON *o, const os_qwen2_config *c, int vocab, const char *dtype) {
    cJSON *arch = cJSON_CreateArray();
    cJSON_AddItemToArray(arch, cJSON_CreateString("Qwen2ForCausalLM"));
    set_item(o, "architectures", arch);
    set_item(o, "model_type", cJSON_CreateString("qwen2"));
    set_item(o, "vocab_size", cJSON_CreateNumber(vocab));
    set_item(o, "hidden_size", cJSON_CreateNumber(c->hidden_size));
    set_item(o, "intermediate_size", cJSON_CreateNumber(c->intermediate_size));
    set_item(o, "num_hidden_layers", cJSON_CreateNumber(c->num_hidden_layers));
    set_item(o, "num_attention_heads", cJSON_CreateNumber(c->num_attention_heads));
    set_item(o, "num_key_value_heads", cJSON_CreateNumber(c->num_key_value_heads));
    set_item(o, "head_dim", cJSON_CreateNumber(c->head_dim));
    set_item(o, "max_position_embeddings", cJSON_CreateNumber(c->max_position_embeddings));
    set_item(o, "rms_norm_eps", cJSON_CreateNumber(c->rms_norm_eps));
    set_item(o, "rope_theta", cJSON_CreateNumber(c->rope_theta));
    cJSON *rp = cJSON_CreateObject();
    cJSON_AddStringToObject(rp, "rope_type", "default");
    cJSON_AddNumberToObject(rp, "rope_theta", c->rope_theta);
    set_item(o, "rope_parameters", rp);
    set_item(o, "rope_scaling", cJSON_CreateNull());
    set_item(o, "hidden_act", cJSON_CreateString("silu"));
    set_item(o, "tie_word_embeddings", cJSON_CreateBool(c->tie_word_embeddings));
    set_item(o, "use_sliding_window", cJSON_CreateFalse());
    set_item(o, "use_cache", cJSON_CreateTrue());
    set_item(o, "torch_dtype", cJSON_CreateString(dtype));
    set_item(o, "dtype", cJSON_CreateString(dtype));
    if (c->bos_token_id >= 0 && !cJSON_GetObjectItemCaseSensitive(o, "bos_token_id"))
        set_item(o, "bos_token_id", cJSON_CreateNumber(c->bos_token_id));
    if (c->eos_token_id >= 0 && !cJSON_GetObjectItemCaseSensitive(o, "eos_token_id"))
        set_item(o, "eos_token_id", cJSON_CreateNumber(c->eos_token_id));
}

int os_qwen2_config_write(const char *path, const os_qwen2_config *c, int vocab_size_override) {
    cJSON *o = cJSON_CreateObject();
    set_qwen2_fields(o, c, vocab_size_override > 0 ? vocab_size_override : c->vocab_size, "float32");
    int rc = write_json(path, o);
    cJSON_Delete(o);
    return rc;
}

int os_qwen2_config_rewrite(const char *src_path, const char *dst_path, int new_vocab_size, const char *dtype) {
    os_qwen2_config c;
    cJSON *o = load_json(src_path);
    if (!o) return -1;
    int rc = qwen2_from_json(src_path, o, &c);
    if (rc == 0) {
        // layer_types has one entry per layer (kept as is: num_hidden_layers does not change here)
        set_qwen2_fields(o, &c, new_vocab_size > 0 ? new_vocab_size : c.vocab_size, dtype ? dtype : "float32");
        rc = write_json(dst_path, o);
    }
    cJSON_Delete(o);
    return rc;
}

int os_whisper_config_load(const char *path, os_whisper_config *c) {
    memset(c, 0, sizeof *c);
    cJSON *o = load_json(path);
    if (!o) return -1;
    char mt[32], act[32];
    int rc = get_string(path, o, "model_type", "whisper", mt, sizeof mt) || require_value(path, "model_type", mt, "whisper") ||
             get_pos_int(path, o, "d_model", 0, &c->d_model) ||
             get_pos_int(path, o, "encoder_layers", 0, &c->encoder_layers) ||
             get_pos_int(path, o, "encoder_attention_heads", 0, &c->encoder_attention_heads) ||
             get_pos_int(path, o, "encoder_ffn_dim", 0, &c->encoder_ffn_dim) ||
             get_pos_int(path, o, "num_mel_bins", 80, &c->num_mel_bins) ||
             get_pos_int(path, o, "max_source_positions", 1500, &c->max_source_positions) ||
             get_string(path, o, "activation_function", "gelu", act, sizeof act) ||
             require_value(path, "activation_function", act, "gelu")
                 ? -1
                 : 0;
    if (rc == 0 && c->d_model % c->encoder_attention_heads)
        rc = os_errf("%s: field 'd_model': %d is not a multiple of encoder_attention_heads %d", path, c->d_model,
                     c->encoder_attention_heads);
    cJSON_Delete(o);
    return rc;
}

// dir[0..n) reads like a Hub id "org/name" (letters, digits, '.', '_', '-'; one '/' inside)
static int hub_id_like(const char *dir, size_t n) {
    const char *slash = memchr(dir, '/', n);
    if (!slash || slash == dir || slash + 1 == dir + n || memchr(slash + 1, '/', (size_t)(dir + n - slash - 1)) ||
        dir[0] == '.' || dir[0] == '~')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)dir[i]) && !strchr("._-/", dir[i])) return 0;
    return 1;
}

int os_hub_id_check(const char *option, const char *dir) {
    struct stat st;
    if (!dir || stat(dir, &st) == 0 || !hub_id_like(dir, strlen(dir))) return 0;
    const char *slash = strchr(dir, '/');
    return os_errf("%s '%s': no such directory; it reads like a Hugging Face Hub id, and omnishard downloads nothing "
                   "(it reads local directories only). Download it first, e.g. `huggingface-cli download %s "
                   "--local-dir models/%s`, then pass %s models/%s", option, dir, dir, slash + 1, option, slash + 1);
}

int os_dataset_hub_id_check(const char *option, const char *spec, const char *path) {
    struct stat st;
    if (!path || stat(path, &st) == 0 || !hub_id_like(path, strcspn(path, ":"))) return 0;   // ms-swift's ID:SUBSET
    static const char *const files[] = {".jsonl", ".json", ".parquet", ".csv", ".txt"};
    size_t n = strcspn(path, ":");
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)   // a missing file, not an id
        if (n > strlen(files[i]) && !strncmp(path + n - strlen(files[i]), files[i], strlen(files[i]))) return 0;
    const char *name = memchr(path, '/', n) + 1;
    int nn = (int)(path + n - name), ni = (int)n;
    return os_errf("%s '%s': no such file or folder; it reads like a dataset id of the Hugging Face Hub (or ModelScope), "
                   "and omnishard downloads nothing (it reads local files only). Download it first, e.g. "
                   "`huggingface-cli download --repo-type dataset %.*s --local-dir data/%.*s` (ModelScope: `modelscope "
                   "download --dataset %.*s --local_dir data/%.*s`), convert its Parquet files with `omnishard convert "
                   "data/%.*s --output_dir %.*s` (docs/dataset.md), then pass %s %.*s%s", option, spec, ni, path, nn, name,
                   ni, path, nn, name, nn, name, nn, name, option, nn, name, strlen(spec) > strlen(path) ? spec + strlen(path) : "");
}

int os_model_dir_check(const char *option, const char *dir, const char *missing_file) {
    struct stat st;
    char p[4200];
    if (!dir) return 0;
    if (missing_file) snprintf(p, sizeof p, "%s/%s", dir, missing_file);
    else snprintf(p, sizeof p, "%s/config.json", dir);
    int speech = !strcmp(option, "--speech_encoder");
    const char *missing = stat(dir, &st) != 0                ? " (no such directory)"
                          : !S_ISDIR(st.st_mode)             ? " (not a directory)"
                          : missing_file || stat(p, &st) != 0 ? ""
                                                             : NULL;
    if (!missing) return 0;
    return os_errf("%s '%s': %s not found%s; a model directory holds %s. Get one with e.g. `%s` (omnishard downloads "
                   "nothing; README.md \"Use\")", option, dir, p, missing,
                   speech ? "config.json and model.safetensors, as a Hugging Face Whisper download has"
                          : "config.json, tokenizer.json (for SLAM-Omni records) and model.safetensors (or "
                            "model.safetensors.index.json with its shards), as a Hugging Face Qwen2 download has",
                   speech ? "huggingface-cli download openai/whisper-small --local-dir whisper-small"
                          : "huggingface-cli download Qwen/Qwen2.5-0.5B-Instruct --local-dir Qwen2.5-0.5B-Instruct");
}
