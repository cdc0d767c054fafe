// What a model directory gives the model, what it lacks and what it holds that nothing reads
// (docs/model-directory.md "Tensors read, ignored and initialised"). Run after os_params_check_map.
#pragma once
#include "io/safetensors.h"
#include "model/params.h"

typedef struct {
    int first_slam;      // no slam_omni.safetensors: the SLAM-Omni modules may be initialised (a first run from Qwen2)
    int first_speech;    // --speech_encoder given: the projector may be initialised when the directory has none of it
    int tied;            // tie_word_embeddings: an lm_head.weight in the directory is ignored (as in transformers)
} os_audit_rules;

// Over the parameters of buckets [0, nb) and every tensor of d (directory dir): -1 + message naming them when
// tensors are read by no parameter, or when a parameter that could be initialised (adapter, projector) is
// missing outside the rules' cases (and a first LoRA run: no LoRA tensor in d). Otherwise 0; rank 0 prints one
// line listing what is initialised and how (also the vocabulary rows a resize adds), and one naming the tensors
// ignored by rule.
int os_params_audit(const os_registry *r, const os_st_dir *d, const char *dir, int nb, const os_audit_rules *rules);
