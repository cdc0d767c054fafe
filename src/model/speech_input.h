// The model's side of the speech input (docs/speech.md): the projector of a SLAM-Omni model over a micro-batch of
// encoder outputs, its weights read through os_weights and its gradients written through os_grads like every other
// weight of the model (model/weights.h). The Whisper encoder before it is os_whisper_fwd (model/whisper.h).
// Per sample b of B: feat[b] [T_enc, d] encoder output, act[b] [T_s, os_projector_act_floats] activations kept for
// the backward, out[b] / dout[b] [T_s, C] (all on the backend's memory; on: host); only the samples with on[b] set
// are computed.
#pragma once
#include "model/omni.h"
#include "model/weights.h"

// the projector's sizes (k, d, hidden, C, kind) of model m (its encoder declared: d = the encoder's width)
os_proj_dims os_model_proj_dims(const os_model *m);
// Opens and closes the projector's bucket through w whatever on holds (every rank calls it at the same point).
void os_projector_forward(const os_model *m, const os_weights *w, int64_t B, const int *on, const float *feat,
                          int64_t T_enc, int64_t T_s, float *act, float *out);
// Parameter gradients from dout, accumulated through g (the bucket's gradient scope is opened and closed here, and
// its weights gathered through w); a frozen projector computes nothing. scratch [T_s * os_projector_scratch_floats].
void os_projector_backward(const os_model *m, const os_weights *w, const os_grads *g, int64_t B, const int *on,
                           const float *feat, int64_t T_enc, int64_t T_s, const float *act, const float *dout,
                           float *scratch);
