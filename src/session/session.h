// A session: a model opened for compute, below both training (train/) and generation (infer/). Opening reads the
// model directory (config.json, slam_omni.json, the checkpoint tensors, --speech_encoder's Whisper directory),
// declares the model's parameters, freezes what is not trained, creates the sharding runtime with this rank's
// part filled (stage 3: each rank reads only its slices), the speech front end (session/speech.h) and the model's
// activations. What a run does with it (the optimizer, the step, generation) is the caller's (docs/design.md
// "The session layer").
#pragma once
#include "io/safetensors.h"
#include "model/activations.h"
#include "model/freeze.h"
#include "model/omni.h"
#include "session/speech.h"
#include "zero/runtime.h"

// What opening a session needs (training fills it from its options, generation from its own)
typedef struct {
    const char *model;             // the model directory
    const char *speech_encoder;    // the Whisper encoder directory (NULL: none)
    const char *cache_speech_features;   // the encoder-output cache directory (NULL: none)
    int slam;                      // 1: a SLAM-Omni model (slam_omni.json read), 0: a plain Qwen2 causal LM
    int code_layer, num_latency_tokens, do_layershift;   // -1: slam_omni.json's
    os_lora_config lora;           // LoRA adapters (rank 0: none; docs/training.md "LoRA")
    const float *loss_weights;     // [n_loss_weights] text, then each audio layer (0 values: the config's)
    int n_loss_weights;
    int zero_stage;                // the runtime's ZeRO stage 0-3
    int bf16;                      // bf16 mixed precision (docs/training.md "bf16 mixed precision")
    uint64_t seed;                 // initial values of parameters the checkpoint lacks
    int frozen;                    // every bucket frozen: no gradients, no AdamW moments (generation)
    int checkpoint;                // model is OUTPUT_DIR/checkpoint-STEP of omnishard sft: its files verified, its
                                   // weights from the rank files (os_checkpoint_load), LoRA and the recorded speech
                                   // encoder from its slam_omni.json (with frozen: generation, export)
    os_freeze_opts freeze;         // without frozen: what training freezes (model/freeze.h)
    const char *new_rows_init;     // rows a vocabulary resize adds: NULL or "mean_resizing" (the mean), else normal
} os_session_opts;

typedef struct {
    os_model model;
    zr_runtime rt;
    os_model_acts acts;    // the forward/backward's activations, allocated once and reused by every micro-batch
    os_st_dir *ckpt;
    os_st_dir *enc_ckpt;   // --speech_encoder's checkpoint (NULL: none)
    os_speech speech;      // the speech input path (speech.on 0: none)
    const char *model_dir;
    int32_t pad_id;
    int64_t ckpt_step;     // opened from a checkpoint (os_session_opts.checkpoint): the step it holds
    os_name_map enc_map;   // the encoder checkpoint's tensor names (os_whisper_name_map), from declare to load
} os_session;

// collective; 0 or -1 + message (the caller stops every rank). The two halves of it: declare reads and checks the
// configurations and the tensor headers (the checkpoint's files verified), declares the model's parameters and
// freezes them as asked - no weight is read, no collective (sft opens its data between the two); load makes the
// runtime, reads the weights (collective from a checkpoint), opens the speech path and the activations.
int os_session_open(os_session *s, const os_session_opts *o, int rank, int nranks);
int os_session_declare(os_session *s, const os_session_opts *o);
int os_session_load(os_session *s, const os_session_opts *o, int rank, int nranks);
// The model's configuration as the session resolves it (config.json, slam_omni.json, then the options that override
// them: code layers, latency, layer shift, loss weights); reads files only, no collective. -1 + message.
int os_session_model_config(const os_session_opts *o, os_qwen2_config *cfg, os_omni_config *oc);
void os_session_close(os_session *s);
