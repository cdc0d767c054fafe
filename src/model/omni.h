// The SLAM-Omni model: a Qwen2 decoder whose vocabulary holds T text + A audio ids, input embedding = mean of
// the G+1 rows' embeddings, text logits = logits[:, :T], audio logits = group_decode_adapter(logits[:, T:T+A])
// split into G layers (G = 1: logits[:, T:T+A] directly). G = 0 is a plain Qwen2 causal LM (one text row).
// With layer shift (the reference's do_layershift) every layer has its own A rows: vocabulary T + G*A, layer g's
// id a is T + g*A + a, its logits are logits[:, T+g*A : T+(g+1)*A], and there is no adapter.
// See docs/spec/slam-omni.md. Parameters are declared in m->reg (params.h); where they live and their data is the
// sharding runtime's (zero/registry.h, zero/runtime.h; session/model_runtime.h joins the two).
#pragma once
#include "core/numtext.h"   // os_float_str
#include "io/hfconfig.h"
#include <stddef.h>
#include "model/projector.h"
#include "model/params.h"
#include "model/whisper.h"

#define OS_MAX_G 8

// LoRA (docs/training.md "LoRA"): per decoder layer, for each targeted linear W [O, I], lora_A [r, I] and lora_B
// [O, r] in the layer's LoRA bucket; y = W x + b + (alpha / r) * B A dropout(x). Targets in this order:
enum { OS_LORA_Q, OS_LORA_K, OS_LORA_V, OS_LORA_O, OS_LORA_GATE, OS_LORA_UP, OS_LORA_DOWN, OS_LORA_N };
extern const char *const os_lora_module[OS_LORA_N];   // "q_proj", ... "down_proj" (PEFT target_modules names)
typedef struct {
    int rank;             // r; 0: no LoRA
    float alpha, dropout;
    unsigned targets;     // bit t set: module t has LoRA
} os_lora_config;
// "all-linear" or comma-separated module names -> target bits; -1 + message on an unknown name
int os_lora_parse_targets(const char *s, unsigned *targets);

typedef struct {
    int G;                 // code layers (0 = plain LLM)
    int64_t text_vocab;    // T (padded text vocabulary); for G = 0 the whole vocabulary
    int64_t audio_vocab;   // A (padded audio vocabulary)
    int adapter;           // group-decode adapter Linear(A, G*A) present (G > 1 without layer shift)
    int layershift;        // do_layershift: layer g's ids at T + g*A (vocabulary T + G*A), no adapter
    int latency;           // num_latency_tokens: pad_a positions before the answer audio of every layer
    float loss_w[OS_MAX_G + 1];   // weights: [0] text, [1+i] audio layer i
    int64_t speech_dim;    // d_model of the speech encoder feeding the projector; 0: no projector (docs/speech.md)
    int64_t proj_hidden;   // projector hidden size (default 2048)
    int64_t proj_k;        // encoder frames concatenated per LLM position (default 5)
    int proj_kind;         // os_proj_kind: slam_omni.json "encoder_projector", "linear" (default) | "cov1d-linear"
    os_lora_config lora;   // LoRA adapters on the decoder's linear layers (rank 0: none)
    char speech_encoder[4096];   // slam_omni.json "speech_encoder": the Whisper encoder directory the model was
                                 // trained with, as given to --speech_encoder ("": none recorded)
} os_omni_config;

// The tensors of a decoder layer, in declaration order (their names and shapes: LAYER_TENSORS in omni.c), named once
// for their ids (here), their weights and gradients (model/layer.h) and the code that resolves the ones from the
// others (model/forward.c): X(arg, field) for each.
#define OS_LAYER_TENSORS(X, arg) \
    X(arg, ln1) X(arg, q_w) X(arg, q_b) X(arg, k_w) X(arg, k_b) X(arg, v_w) X(arg, v_b) X(arg, o_w) X(arg, ln2) \
    X(arg, gate) X(arg, up) X(arg, down)
#define OS_LAYER_FIELD(type, field) type field;

typedef struct {
    OS_LAYER_TENSORS(OS_LAYER_FIELD, int)
    int lora_a[OS_LORA_N], lora_b[OS_LORA_N];   // -1: module not targeted
} os_layer_ids;

typedef struct {
    os_qwen2_config cfg;
    os_omni_config oc;
    int64_t C, H, KH, D, F, V, nlayers;   // hidden, heads, kv heads, head dim, MLP dim, vocab (T+A or T+G*A), layers
    os_registry reg;
    int embed, lm_head, final_norm, adapter_w, adapter_b;   // param ids (lm_head == embed when tied)
    os_layer_ids *layer;
    int b_embed, b_head, b_norm, b_adapter, *b_layer;       // bucket ids (b_head == b_embed when tied)
    int64_t ckpt_vocab;   // vocabulary rows found in the checkpoint (rows beyond are initialised)
    int b_proj, proj_w1, proj_b1, proj_w2, proj_b2;   // speech projector (-1 when oc.speech_dim is 0)
    int proj_cw, proj_cb;                             // its convolution (cov1d-linear; else -1)
    int *b_lora;          // per layer: its LoRA bucket (NULL without LoRA)
    os_whisper enc;       // frozen speech encoder, declared after os_model_build (enc.nlayers 0: none)
    int64_t logits_rows;  // a run's setting, not the checkpoint's: rows per logits chunk of the head, its stash and
                          // the memory plan (k_xent_chunk_rows); 0: from V. os_model_build sets it to
                          // os_model_force_logits_rows's (the test hook OMNISHARD_LOGITS_ROWS, set once at start)
} os_model;

// the test hook OMNISHARD_LOGITS_ROWS (main sets it once at start; 0, the default: from V): every model built
// after it chunks its logits in this many rows
void os_model_force_logits_rows(int64_t rows);

// Reference defaults (slam-omni.md): G 3, T 152000, A 4160, weights 1/(G+1)
void os_omni_config_default(os_omni_config *oc, int G);
// Read DIR/slam_omni.json if present (keys: code_layer, padded_text_vocabsize, padded_audio_vocabsize,
// loss_weights, encoder_dim, projector_hidden, encoder_projector_ds_rate, encoder_projector, num_latency_tokens,
// do_layershift, lora_rank, lora_alpha, lora_dropout, lora_target_modules, speech_encoder); absent keys keep oc's
// values (speech_encoder: none). Returns 1
// if the file exists, 0 if not, -1 on error.
int os_omni_config_load(const char *path, os_omni_config *oc);
int os_omni_config_write(const char *path, const os_omni_config *oc);
// Set layer shift (the adapter goes with it) and the latency tokens of oc
void os_omni_config_codes(os_omni_config *oc, int layershift, int latency);
// The raw audio id a (0..A-1) of layer g as an LLM token id: T + a, or T + g*A + a with layer shift
static inline int32_t os_audio_token(const os_omni_config *oc, int64_t g, int32_t a) {
    return (int32_t)(oc->text_vocab + (oc->layershift ? g * oc->audio_vocab : 0) + a);
}

// Declare every parameter and bucket. cfg comes from config.json; ckpt_vocab = the checkpoint's vocab rows.
// With oc->speech_dim > 0 (G >= 1) the speech projector is declared too (bucket "encoder_projector", trained,
// PyTorch Linear init when absent); the Whisper encoder is declared separately (os_whisper_declare on m->reg).
int os_model_build(os_model *m, const os_qwen2_config *cfg, const os_omni_config *oc);
void os_model_free(os_model *m);
// Buckets [0, n) hold the model's own parameters (exported and checkpointed); the frozen speech encoder's, declared
// last, are read from --speech_encoder and written nowhere.
int os_model_own_buckets(const os_model *m);
// LoRA module t of layer l: the base weight's parameter id and its sizes [O, I]
int os_lora_base(const os_model *m, int64_t l, int t, int64_t *O, int64_t *I);
