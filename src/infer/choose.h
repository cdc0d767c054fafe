// Token choice of one stream (the text, or one audio layer) from its logits, as the reference's generate does it
// (SLAM-LLM examples/s2s/model/slam_model_s2s.py: repetition_penalty :680-693, then sample_next_token :638-678):
//   1. repetition penalty over the ids this stream chose before (each distinct id once): a logit s becomes
//      s * penalty when s < 0, else s / penalty (1: unchanged);
//   2. greedy (do_sample 0): the argmax (its first maximum); temperature, top_k and top_p cannot change it;
//   3. sampling: logits / temperature; top_k > 0 keeps the logits >= the k-th largest (ties at the k-th kept);
//      top_p < 1 keeps, in descending order, each token whose predecessors' softmax mass is <= top_p (the first
//      always); a draw from the softmax over what is kept, by the inverse CDF of the uniform u (descending order,
//      ties by the smaller id first).
#pragma once
#include <stdint.h>

typedef struct {
    int do_sample;        // 0: greedy
    double temperature;   // > 0 (sampling only)
    int64_t top_k;        // 0: all
    double top_p;         // (0, 1]; 1: all
} os_choice_opts;

// work space for streams of up to n logits
typedef struct {
    float *x;
    int32_t *idx;
    uint8_t *seen;
    int64_t n;
} os_choice_work;

void os_choice_work_init(os_choice_work *w, int64_t n);
void os_choice_work_free(os_choice_work *w);

// The id chosen from logits z[n] (z is not changed); hist[i * stride] for i < nhist: the ids this stream chose
// before (each in [0, n)); u: a uniform in [0, 1) (sampling only).
int32_t os_choose(const float *z, int64_t n, const int32_t *hist, int64_t nhist, int64_t stride, double penalty,
                  const os_choice_opts *o, double u, os_choice_work *w);
