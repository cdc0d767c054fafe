// What one micro-step works on (os_trainer: the model, the runtime, the speech path, the parameter loss terms)
// and what it reports (os_step_stats); the step (train/step.h), the head and the speech path share these.
#pragma once
#include "model/activations.h"
#include "model/forward.h"
#include "model/omni.h"
#include "zero/runtime.h"

typedef enum { OS_TERM_L2, OS_TERM_DUMMY } os_term_kind;
// A loss term over parameters (design invariant 5): applies to every parameter whose name starts with prefix.
typedef struct {
    os_term_kind kind;
    float coef;           // L2: coef * sum p^2 ; DUMMY: 0 * sum p (the DDP "unused parameters" trick)
    char prefix[96];
} os_param_term;

struct os_speech;   // session/speech.h

typedef struct {
    os_model *m;
    zr_runtime *rt;
    struct os_speech *speech;   // speech input path (NULL: the model has no speech encoder); prepared per batch
    // the model's options of the run, built once at open: training (recompute per --gradient_checkpointing, LoRA
    // dropout) and evaluation (neither); a micro-batch adds only its gradients and its dropout stream
    os_model_opts train_opts, eval_opts;
    int head_balance;     // with several ranks, the loss's rows move between them (train/head_balance.h)
    os_param_term *terms;
    int nterms;
    double *term_vals;    // [parameters * nterms] on the backend's memory: sum p^2 of parameter i under term k at
                          // [i * nterms + k] (os_apply_param_terms), read by the step (os_param_terms_value)
    float term_scale;     // gradient scale of the parameter terms: 1 / (ranks * accumulation steps)
    int forward_only;     // evaluation: losses only, no backward, no gradient scope, no parameter terms (every
                          // rank must be in the same mode: the gradient scopes' collectives are skipped)
    float *dump_logits;   // debug: when set, the loss copies the lm_head logits [B*L, V] here
    uint64_t lora_key;    // LoRA dropout stream of this micro-batch (os_lora_dropout_key); unused without dropout
    os_model_acts *acts;  // the forward/backward's activations (the session's), reused by every micro-batch
} os_trainer;

typedef struct {
    double loss;                        // weighted data loss of this micro-batch
    double term_loss;                   // value of the parameter loss terms
    double sum[OS_MAX_G + 1];           // per loss term: summed CE, valid count, correct argmax
    int64_t count[OS_MAX_G + 1], correct[OS_MAX_G + 1];
    int64_t tokens;                     // real (unpadded) positions
    int64_t head_moved;                 // rows the head sent to other ranks (train/head_balance.h)
} os_step_stats;

// Parse "l2:COEF:PREFIX" or "dummy:PREFIX"; -1 + message on bad syntax.
int os_param_term_parse(const char *s, os_param_term *out);
// Apply the loss terms over bucket b's parameters (its gradient scope must be open): their gradients added, their
// parameters' sums into t->term_vals (the parameters do not change within a step, so a second call writes the same).
void os_apply_param_terms(os_trainer *t, int b);
// Their value over bucket b, from vals: a host copy of t->term_vals taken after os_apply_param_terms(t, b).
double os_param_terms_value(const os_trainer *t, int b, const double *vals);
