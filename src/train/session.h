// Opening a model for training: config.json (+ slam_omni.json), the checkpoint tensors, the parameter
// registry, the sharding runtime with this rank's part filled (stage 3: each rank reads only its slices).
#pragma once
#include "io/safetensors.h"
#include "model/omni.h"
#include "train/args.h"
#include "train/speech.h"
#include "zero/runtime.h"

typedef struct {
    os_model model;
    zr_runtime rt;
    os_trainer trainer;
    os_st_dir *ckpt;
    os_st_dir *enc_ckpt;   // --speech_encoder's checkpoint (NULL: none)
    os_speech speech;      // the speech input path (speech.on 0: none)
    const char *model_dir;
    int32_t pad_id;
} os_session;

// 1 when --torch_dtype asks for bf16 mixed precision (bfloat16 or bf16); os_session_open then switches k_gemm to it
int os_sft_bf16(const os_sft_args *a);
// collective; 0 or -1 + message (the caller stops every rank)
int os_session_open(os_session *s, const os_sft_args *a, int rank, int nranks);
void os_session_close(os_session *s);
